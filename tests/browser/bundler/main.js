// The scratch app's entry for the bundler test (bundler.test.mjs): the package imported by its
// name, as an app would, and handed to the test through `window`.
import * as st5 from 'st5';

window.st5 = st5;
document.body.dataset.ready = '1';
