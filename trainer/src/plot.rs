//! The training plot: loss (left) and STS-B dev Spearman (right) against the step, as a PNG,
//! with no dependencies: a pixel canvas, lines, a 3×5 pixel font for labels, and a PNG writer
//! with stored (uncompressed) deflate blocks. Stage boundaries are drawn as grey verticals.

const W: usize = 900;
const H: usize = 340;
const SCALE: usize = 2; // font pixel size

/// 3×5 glyphs, one row of 3 bits each, top to bottom.
fn glyph(c: char) -> [u8; 5] {
    match c.to_ascii_uppercase() {
        '0' => [7, 5, 5, 5, 7],
        '1' => [2, 6, 2, 2, 7],
        '2' => [7, 1, 7, 4, 7],
        '3' => [7, 1, 3, 1, 7],
        '4' => [5, 5, 7, 1, 1],
        '5' => [7, 4, 7, 1, 7],
        '6' => [7, 4, 7, 5, 7],
        '7' => [7, 1, 1, 2, 2],
        '8' => [7, 5, 7, 5, 7],
        '9' => [7, 5, 7, 1, 7],
        '.' => [0, 0, 0, 0, 2],
        '-' => [0, 0, 7, 0, 0],
        'A' => [2, 5, 7, 5, 5],
        'B' => [6, 5, 6, 5, 6],
        'C' => [7, 4, 4, 4, 7],
        'D' => [6, 5, 5, 5, 6],
        'E' => [7, 4, 6, 4, 7],
        'G' => [7, 4, 5, 5, 7],
        'I' => [7, 2, 2, 2, 7],
        'L' => [4, 4, 4, 4, 7],
        'M' => [5, 7, 7, 5, 5],
        'N' => [6, 5, 5, 5, 5],
        'O' => [7, 5, 5, 5, 7],
        'P' => [7, 5, 7, 4, 4],
        'R' => [6, 5, 6, 5, 5],
        'S' => [7, 4, 7, 1, 7],
        'T' => [7, 2, 2, 2, 2],
        'V' => [5, 5, 5, 5, 2],
        'X' => [5, 5, 2, 5, 5],
        _ => [0; 5],
    }
}

struct Canvas {
    px: Vec<[u8; 3]>,
}

impl Canvas {
    fn new() -> Self {
        Self { px: vec![[255; 3]; W * H] }
    }
    fn set(&mut self, x: i64, y: i64, c: [u8; 3]) {
        if (0..W as i64).contains(&x) && (0..H as i64).contains(&y) {
            self.px[y as usize * W + x as usize] = c;
        }
    }
    fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), c: [u8; 3]) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let (mut x, mut y, mut err) = (x0, y0, dx + dy);
        loop {
            self.set(x, y, c);
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }
    fn text(&mut self, x: i64, y: i64, s: &str) {
        for (i, ch) in s.chars().enumerate() {
            for (row, bits) in glyph(ch).iter().enumerate() {
                for col in 0..3 {
                    if bits >> (2 - col) & 1 == 1 {
                        for (dx, dy) in (0..SCALE).flat_map(|a| (0..SCALE).map(move |b| (a, b))) {
                            let px = x + ((i * 4 + col) * SCALE + dx) as i64;
                            self.set(px, y + (row * SCALE + dy) as i64, [0; 3]);
                        }
                    }
                }
            }
        }
    }
}

/// One panel: `points` `(step, value)` scaled into the box at `x0`.
fn panel(
    c: &mut Canvas,
    x0: i64,
    title: &str,
    points: &[(f64, f64)],
    max_step: f64,
    breaks: &[f64],
    color: [u8; 3],
) {
    let (left, top, w, h) = (x0 + 60, 30i64, 360i64, 260i64);
    c.text(left, 8, title);
    c.line((left, top), (left, top + h), [0; 3]);
    c.line((left, top + h), (left + w, top + h), [0; 3]);
    let finite: Vec<(f64, f64)> = points.iter().copied().filter(|p| p.1.is_finite()).collect();
    if finite.is_empty() {
        return;
    }
    let (mut lo, mut hi) =
        finite.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    if hi - lo < 1e-9 {
        (lo, hi) = (lo - 0.5, hi + 0.5);
    }
    let to_px = |(s, v): (f64, f64)| {
        (
            left + (s / max_step.max(1.0) * w as f64) as i64,
            top + h - ((v - lo) / (hi - lo) * h as f64) as i64,
        )
    };
    for &b in breaks {
        let x = to_px((b, lo)).0;
        c.line((x, top), (x, top + h), [190; 3]);
    }
    for (label, v) in [(format!("{hi:.2}"), hi), (format!("{lo:.2}"), lo)] {
        let y = to_px((0.0, v)).1;
        c.text(x0 + 4, y - 4, &label);
        c.line((left - 4, y), (left, y), [0; 3]);
    }
    c.text(left + w - 60, top + h + 8, &format!("{}", max_step as u64));
    c.text(left, top + h + 8, "0");
    for pair in finite.windows(2) {
        c.line(to_px(pair[0]), to_px(pair[1]), color);
    }
    for &p in &finite {
        let (x, y) = to_px(p);
        for d in -1..=1 {
            c.set(x + d, y, color);
            c.set(x, y + d, color);
        }
    }
}

/// The plot as PNG bytes. `loss` and `dev` are `(global step, value)`; `breaks` the global
/// steps where stages begin.
pub fn png(loss: &[(f64, f64)], dev: &[(f64, f64)], breaks: &[f64]) -> Vec<u8> {
    let max_step = loss.iter().chain(dev).map(|p| p.0).fold(1.0, f64::max);
    let mut c = Canvas::new();
    panel(&mut c, 0, "LOSS", loss, max_step, breaks, [200, 40, 40]);
    panel(&mut c, 450, "STS-B DEV SPEARMAN", dev, max_step, breaks, [30, 90, 200]);
    encode(&c)
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend((data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend(kind);
    out.extend(data);
    let crc = crc32(&out[start..]);
    out.extend(crc.to_be_bytes());
}

/// RGB8 PNG; the image data is a zlib stream of stored deflate blocks.
fn encode(c: &Canvas) -> Vec<u8> {
    let mut raw = Vec::with_capacity(H * (1 + 3 * W));
    for row in c.px.chunks(W) {
        raw.push(0); // filter: none
        raw.extend(row.iter().flatten());
    }
    let mut z = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65_535).collect();
    for (i, b) in blocks.iter().enumerate() {
        z.push((i + 1 == blocks.len()) as u8);
        z.extend((b.len() as u16).to_le_bytes());
        z.extend((!(b.len() as u16)).to_le_bytes());
        z.extend(*b);
    }
    let (mut a, mut s) = (1u32, 0u32);
    for &byte in &raw {
        a = (a + byte as u32) % 65_521;
        s = (s + a) % 65_521;
    }
    z.extend(((s << 16) | a).to_be_bytes());
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend((W as u32).to_be_bytes());
    ihdr.extend((H as u32).to_be_bytes());
    ihdr.extend([8, 2, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &z);
    chunk(&mut out, b"IEND", &[]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_and_png_structure() {
        // The CRC-32 check value.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        let png = png(&[(1.0, 3.0), (2.0, 2.0), (3.0, f64::NAN)], &[(3.0, 20.0)], &[2.0]);
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), W as u32);
        assert_eq!(&png[png.len() - 8..png.len() - 4], b"IEND");
    }
}
