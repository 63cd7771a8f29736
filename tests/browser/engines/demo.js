// The demo page driven inside an engine that Playwright does not drive (Firefox over WebDriver
// BiDi, WebKit over classic WebDriver): engines.test.mjs serves www/index.html with this module
// beside app.js. It acts as a person would, through the page's own controls and events: on the
// first visit (`?phase=1`) it drops three files (a DataTransfer on the drop zone), waits for the
// progress to finish, filters by kind and searches in each mode; on the second (`?phase=2`, the
// same profile) it checks that everything came back from OPFS without embedding. It leaves
// `window.__st5Report` as engines/cases.js does.

const $ = (id) => document.getElementById(id);
const phase = new URLSearchParams(location.search).get('phase');
const results = [];

const FILES = {
  'lighthouse.md': [
    'text/markdown',
    '# Keeping the light\n\nThe keepers trimmed the wicks each evening.\n\n## Supplies\n\nThe relief boat brought paraffin and letters from the mainland.',
  ],
  'bread.html': [
    'text/html',
    '<title>Sourdough at home</title><script>var quokka = 1;</script><h1>Sourdough</h1><p>Feed the starter with rye flour the night before baking.</p>',
  ],
  'café.txt': ['text/plain', 'Notes from the café in Kraków: the pierogi were superb 😀.'],
};

const until = async (test, what, ms = 300_000) => {
  const end = Date.now() + ms;
  for (;;) {
    const value = test();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (status: ${$('index-status').textContent})`);
    await new Promise((ok) => setTimeout(ok, 100));
  }
};
const settled = (re) =>
  until(() => {
    const t = $('index-status').textContent;
    return re.test(t) && !t.endsWith('…') && t;
  }, `status ${re}`);

/** Types `query` in `mode` as a person would and returns the hits shown. */
async function search(query, mode) {
  $('mode-select').value = mode;
  $('mode-select').dispatchEvent(new Event('change'));
  $('query-input').value = query;
  $('query-input').dispatchEvent(new Event('input', { bubbles: true }));
  await until(() => $('results').dataset.query === query && $('results').dataset.mode === mode, `results for ${query}`);
  return [...document.querySelectorAll('[data-testid=result]')].map((li) => ({
    id: li.dataset.id,
    marks: [...li.querySelectorAll('mark')].map((m) => m.textContent),
  }));
}

async function step(name, run) {
  const t0 = performance.now();
  try {
    results.push({ name, ok: true, note: await run(), ms: performance.now() - t0 });
  } catch (err) {
    results.push({ name, ok: false, note: `${err?.message ?? err}\n${err?.stack ?? ''}`, ms: performance.now() - t0 });
  }
}

const documentsEmbedded = () => st5demo.embedded.filter((t) => t !== '' && !queries.has(t)).length;
const queries = new Set(['paraffin', 'how to bake bread with a starter', 'kraków']);

await until(() => document.body.dataset.ready === '1', 'the page to load its model');
if (phase === '1') {
  await step('demo_dropped_files_are_indexed_with_progress', async () => {
    await settled(/^No documents yet|^Restored/);
    const dt = new DataTransfer();
    for (const [name, [type, text]] of Object.entries(FILES)) dt.items.add(new File([text], name, { type }));
    $('drop-zone').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    const note = await settled(/^Added 3 files/);
    const files = [...document.querySelectorAll('[data-testid=file]')].map((li) => li.dataset.id).sort();
    if (files.join() !== 'file:bread.html,file:café.txt,file:lighthouse.md') throw new Error(`files: ${files}`);
    if ($('index-progress').value !== 1) throw new Error(`progress ${$('index-progress').value}`);
    return note;
  });
  await step('demo_search_in_each_mode_with_marks_and_facets', async () => {
    const words = await search('paraffin', 'keyword');
    if (words[0]?.id !== 'file:lighthouse.md' || !words[0].marks.includes('paraffin'))
      throw new Error(JSON.stringify(words));
    const meaning = await search('how to bake bread with a starter', 'vector');
    if (meaning[0]?.id !== 'file:bread.html') throw new Error(JSON.stringify(meaning));
    const cafe = await search('kraków', 'hybrid');
    if (cafe[0]?.id !== 'file:café.txt' || !cafe[0].marks.includes('Kraków')) throw new Error(JSON.stringify(cafe));
    const md = document.querySelector('[data-testid=count-md]')?.textContent;
    if (md !== '1') throw new Error(`Markdown count ${md}`);
    return 'keyword, vector and hybrid find the dropped files, words marked; facet counts shown';
  });
} else if (typeof (await navigator.storage?.getDirectory?.().catch(() => null)) === 'object') {
  await step('demo_a_reload_restores_the_files_from_opfs', async () => {
    const note = await settled(/^Restored 3 documents/);
    if (documentsEmbedded()) throw new Error(`${documentsEmbedded()} document texts embedded`);
    const words = await search('paraffin', 'keyword');
    if (words[0]?.id !== 'file:lighthouse.md') throw new Error(JSON.stringify(words));
    return `${note} (0 document texts embedded)`;
  });
} else {
  // An engine without OPFS (WebKitGTK's MiniBrowser): the page says it keeps nothing.
  await step('demo_without_opfs_says_it_keeps_nothing', () => settled(/^No documents yet.*not kept in this browser/));
}
window.__st5Report = {
  results,
  features: { module: 'demo', webgpu: !!navigator.gpu, opfs: true, cores: navigator.hardwareConcurrency },
};
