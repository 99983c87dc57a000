//! Vectors on disk, keyed by the SHA-256 of the text they embed.
//!
//! One file per model: a header (magic, the model's digest, the
//! dimension), then fixed-size records (text hash, scale, one signed byte
//! per dimension). Vectors are unit length, so a byte per dimension keeps
//! cosine similarity to about two decimals at a quarter of the size.
//! Records are only appended; a record cut short (a host that died
//! mid-write) is dropped when the file is read.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

const MAGIC: &[u8; 8] = b"MCPVEC01";
const HEADER: usize = 8 + 32 + 4;
/// A store file larger than this is not read (a million 384-byte vectors).
pub const MAX_FILE_BYTES: u64 = 512 << 20;

pub type TextHash = [u8; 32];

pub fn text_hash(text: &str) -> TextHash {
    Sha256::digest(text.as_bytes()).into()
}

/// One vector at a byte per dimension: `value ≈ byte × scale`.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    pub scale: f32,
    pub bytes: Vec<i8>,
}

impl Quantized {
    pub fn new(vector: &[f32]) -> Quantized {
        let largest = vector.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = if largest > 0.0 { largest / 127.0 } else { 1.0 };
        let bytes = vector
            .iter()
            .map(|v| (v / scale).round().clamp(-127.0, 127.0) as i8)
            .collect();
        Quantized { scale, bytes }
    }

    /// The dot product with a full vector (cosine, both being unit length).
    pub fn dot(&self, vector: &[f32]) -> f32 {
        // Eight sums side by side, which the compiler turns into vector
        // instructions (one running sum cannot be: float addition is not
        // reordered); a question is compared with every entry, 8x faster.
        const LANES: usize = 8;
        let mut sums = [0.0f32; LANES];
        let bytes = self.bytes.chunks_exact(LANES);
        let values = vector.chunks_exact(LANES);
        let rest: f32 = bytes
            .remainder()
            .iter()
            .zip(values.remainder())
            .map(|(b, v)| *b as f32 * v)
            .sum();
        for (b, v) in bytes.zip(values) {
            for lane in 0..LANES {
                sums[lane] += b[lane] as f32 * v[lane];
            }
        }
        (sums.iter().sum::<f32>() + rest) * self.scale
    }
}

/// The vectors of one model: every file read, and the one appended to.
pub struct Store {
    digest: [u8; 32],
    dim: usize,
    rows: HashMap<TextHash, Quantized>,
    /// Where new vectors go.
    file: PathBuf,
}

impl Store {
    /// The store of the model with `digest` and `dim`: `file` (created when
    /// missing) and the read-only `seeds` — files built elsewhere for the
    /// same model. A seed of another model is skipped and said so in the
    /// returned notes; a damaged `file` is an error.
    pub fn open(
        digest: [u8; 32],
        dim: usize,
        file: &Path,
        seeds: &[PathBuf],
    ) -> Result<(Store, Vec<String>)> {
        let mut store = Store {
            digest,
            dim,
            rows: HashMap::new(),
            file: file.to_path_buf(),
        };
        let mut notes = Vec::new();
        for seed in seeds {
            match store.read(seed) {
                Ok(n) => notes.push(format!("{}: {n} vectors", seed.display())),
                Err(e) => notes.push(format!("{} skipped: {e:#}", seed.display())),
            }
        }
        let too_big = std::fs::metadata(file).is_ok_and(|m| m.len() > MAX_FILE_BYTES);
        if too_big {
            // Texts that came and went filled it: start afresh (whatever
            // is still wanted is embedded again).
            notes.push(format!("{} was full and is started afresh", file.display()));
            std::fs::remove_file(file).with_context(|| format!("removing {}", file.display()))?;
        }
        if file.exists() {
            store.read(file)?;
            // A record cut short goes, so the next one starts in step.
            let size = std::fs::metadata(file)?.len() as usize;
            let whole = HEADER + (size - HEADER) / store.record_len() * store.record_len();
            if whole < size {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(file)?
                    .set_len(whole as u64)
                    .with_context(|| format!("cutting a broken record off {}", file.display()))?;
            }
        } else {
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            let mut header = Vec::with_capacity(HEADER);
            header.extend_from_slice(MAGIC);
            header.extend_from_slice(&digest);
            header.extend_from_slice(&(dim as u32).to_le_bytes());
            std::fs::write(file, header).with_context(|| format!("writing {}", file.display()))?;
        }
        Ok((store, notes))
    }

    fn record_len(&self) -> usize {
        32 + 4 + self.dim
    }

    /// Read every whole record of `path` into memory; how many.
    fn read(&mut self, path: &Path) -> Result<usize> {
        let size = std::fs::metadata(path)
            .with_context(|| format!("reading {}", path.display()))?
            .len();
        if size > MAX_FILE_BYTES {
            bail!("{size} bytes, more than a store may hold ({MAX_FILE_BYTES})");
        }
        let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        if data.len() < HEADER || &data[..8] != MAGIC {
            bail!(
                "not a vector store (no {} header)",
                String::from_utf8_lossy(MAGIC)
            );
        }
        if data[8..40] != self.digest {
            bail!("its vectors are another model's");
        }
        let dim = u32::from_le_bytes(data[40..44].try_into().expect("4 bytes")) as usize;
        if dim != self.dim {
            bail!("its vectors have {dim} dimensions, the model {}", self.dim);
        }
        let mut count = 0;
        for record in data[HEADER..].chunks_exact(self.record_len()) {
            let hash: TextHash = record[..32].try_into().expect("32 bytes");
            let scale = f32::from_le_bytes(record[32..36].try_into().expect("4 bytes"));
            if !scale.is_finite() {
                continue;
            }
            let bytes = record[36..].iter().map(|b| *b as i8).collect();
            self.rows.insert(hash, Quantized { scale, bytes });
            count += 1;
        }
        Ok(count)
    }

    pub fn get(&self, hash: &TextHash) -> Option<&Quantized> {
        self.rows.get(hash)
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Keep `vectors` (text hash, unit vector) in memory and append them to
    /// the file, in one write.
    pub fn put(&mut self, vectors: Vec<(TextHash, Vec<f32>)>) -> Result<()> {
        let mut out = Vec::with_capacity(vectors.len() * self.record_len());
        for (hash, vector) in vectors {
            if vector.len() != self.dim {
                bail!(
                    "a vector of {} dimensions for a {}-dimension store",
                    vector.len(),
                    self.dim
                );
            }
            let q = Quantized::new(&vector);
            out.extend_from_slice(&hash);
            out.extend_from_slice(&q.scale.to_le_bytes());
            out.extend(q.bytes.iter().map(|b| *b as u8));
            self.rows.insert(hash, q);
        }
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.file)
            .with_context(|| format!("opening {}", self.file.display()))?;
        file.write_all(&out)
            .with_context(|| format!("writing {}", self.file.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: f32, dim: usize) -> Vec<f32> {
        let v: Vec<f32> = (0..dim).map(|i| ((i as f32 + seed) * 0.7).sin()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    #[test]
    fn quantised_vectors_keep_their_cosine() {
        // 384 as the model's; 13 leaves a rest past the eight lanes.
        for dim in [384, 13] {
            let (a, b) = (unit(1.0, dim), unit(2.5, dim));
            let exact: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            let q = Quantized::new(&a);
            assert!((q.dot(&b) - exact).abs() < 0.01, "{} vs {exact}", q.dot(&b));
            assert!((q.dot(&a) - 1.0).abs() < 0.01);
        }
    }

    #[test]
    fn vectors_are_kept_read_again_and_another_models_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.vec");
        let (mut store, _) = Store::open([1; 32], 8, &file, &[]).unwrap();
        store
            .put(vec![
                (text_hash("one"), unit(0.0, 8)),
                (text_hash("two"), unit(1.0, 8)),
            ])
            .unwrap();
        // A record cut short by a crash is dropped, the others stay.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(&[7; 20]).unwrap();
        let (mut again, _) = Store::open([1; 32], 8, &file, &[]).unwrap();
        assert_eq!(again.len(), 2);
        assert_eq!(again.get(&text_hash("two")), store.get(&text_hash("two")));
        again.put(vec![(text_hash("three"), unit(2.0, 8))]).unwrap();
        let (again, _) = Store::open([1; 32], 8, &file, &[]).unwrap();
        assert_eq!(again.len(), 3);
        // As a seed of another model it is skipped, with why.
        let other = dir.path().join("b.vec");
        let (seeded, notes) = Store::open([2; 32], 8, &other, std::slice::from_ref(&file)).unwrap();
        assert!(seeded.is_empty());
        assert!(notes[0].contains("another model"), "{notes:?}");
        // As a seed of the same model it is read.
        let (seeded, _) = Store::open([1; 32], 8, &dir.path().join("c.vec"), &[file]).unwrap();
        assert_eq!(seeded.len(), 3);
    }
}
