//! Minimal `.npy` (format 1.0) reading and writing for little-endian float32 `[rows, cols]`.
//! <https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html>

use std::io::Write;

/// Writes `data` (`rows * cols` values, row-major) as a `<f4` array of shape `(rows, cols)`.
pub fn write_f32(mut w: impl Write, data: &[f32], rows: usize, cols: usize) -> std::io::Result<()> {
    assert_eq!(data.len(), rows * cols, "npy data length must equal rows * cols");
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // Magic (6) + version (2) + header length (2) + dict + padding + '\n' is a multiple of 64.
    let unpadded = 10 + dict.len() + 1;
    let header = format!("{dict}{}\n", " ".repeat(unpadded.next_multiple_of(64) - unpadded));
    w.write_all(b"\x93NUMPY\x01\x00")?;
    w.write_all(&(header.len() as u16).to_le_bytes())?;
    w.write_all(header.as_bytes())?;
    let mut bytes = Vec::with_capacity(data.len() * 4);
    for v in data {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    w.write_all(&bytes)
}

/// Reads a 2-D `<f4` C-order array written by [`write_f32`] or numpy.
pub fn read_f32(bytes: &[u8]) -> Result<(Vec<f32>, usize, usize), String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not an .npy file".into());
    }
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => {
            (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
        }
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let header = std::str::from_utf8(bytes.get(start..start + hlen).ok_or("truncated header")?)
        .map_err(|e| e.to_string())?;
    if !header.contains("'descr': '<f4'") || header.contains("'fortran_order': True") {
        return Err(format!("expected C-order little-endian float32, got {header}"));
    }
    let shape =
        header.split("'shape': (").nth(1).and_then(|s| s.split(')').next()).ok_or("no shape")?;
    let dims: Vec<usize> = shape
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().map_err(|_| format!("bad shape {shape}")))
        .collect::<Result<_, _>>()?;
    let [rows, cols] = dims[..] else { return Err(format!("expected 2 dimensions, got {dims:?}")) };
    let body = &bytes[start + hlen..];
    let needed = rows.checked_mul(cols).and_then(|n| n.checked_mul(4));
    if needed != Some(body.len()) {
        let needed = needed.map_or("more than fits in memory".into(), |n| n.to_string());
        return Err(format!(
            "data has {} bytes, shape ({rows}, {cols}) needs {needed}",
            body.len()
        ));
    }
    Ok((
        body.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        rows,
        cols,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_aligns_header() {
        for (rows, cols) in [(0, 3), (1, 1), (2, 3), (7, 384)] {
            let data: Vec<f32> = (0..rows * cols).map(|i| i as f32 * 0.5 - 1.0).collect();
            let mut buf = Vec::new();
            write_f32(&mut buf, &data, rows, cols).unwrap();
            assert_eq!(
                (buf.len() - rows * cols * 4) % 64,
                0,
                "header of ({rows}, {cols}) not 64-aligned"
            );
            assert_eq!(read_f32(&buf).unwrap(), (data, rows, cols));
        }
    }

    #[test]
    fn rejects_bad_files() {
        assert!(read_f32(b"hello").is_err());
        let mut buf = Vec::new();
        write_f32(&mut buf, &[1.0, 2.0], 1, 2).unwrap();
        assert!(read_f32(&buf[..buf.len() - 1]).is_err());
        // Found by fuzzing: a shape whose byte size overflows usize.
        let huge = b"\x93NUMPY\x01\x00\x5f\x00{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4611686018427387904), }";
        let err = read_f32(huge).unwrap_err();
        assert!(err.contains("more than fits"), "{err}");
    }
}
