//! Vectors on disk, keyed by the SHA-256 of the text they embed.
//!
//! One file per model: a header (magic, the model's digest, the
//! dimension), then fixed-size records (text hash, scale, one signed byte
//! per dimension). Vectors are unit length, so a byte per dimension keeps
//! cosine similarity to about two decimals at a quarter of the size.
//! Records are only appended; a record cut short (a host that died
//! mid-write) is dropped when the file is read.
//!
//! In memory a store holds where each vector lies, not the vector: the
//! vectors a table needs are read into one [`Matrix`] when it is made, so
//! each is held once (issue 73: held twice, they were a tenth of the
//! Godot seed's memory budget).

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
        dot(&self.bytes, self.scale, vector)
    }
}

/// `bytes × scale` dotted with `vector`: with AVX2 and FMA when the
/// processor has them (a question is compared with every entry of an
/// index, 32,000 rows for Godot's: the build's baseline x86-64 has 4-wide
/// vectors only), else the portable loop.
fn dot(bytes: &[i8], scale: f32, vector: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the features the function is compiled for are present.
        return unsafe { dot_avx2(bytes, vector) } * scale;
    }
    dot_portable(bytes, vector) * scale
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dot_avx2(bytes: &[i8], vector: &[f32]) -> f32 {
    // The same loop, compiled for 8-wide vectors.
    dot_portable(bytes, vector)
}

/// Eight sums side by side, which the compiler turns into vector
/// instructions (one running sum cannot be: float addition is not
/// reordered).
#[inline(always)]
fn dot_portable(bytes: &[i8], vector: &[f32]) -> f32 {
    const LANES: usize = 8;
    let mut sums = [0.0f32; LANES];
    let bytes = bytes.chunks_exact(LANES);
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
    sums.iter().sum::<f32>() + rest
}

/// Vectors side by side in one allocation, a row each: what a table of
/// documents is scanned as.
#[derive(Debug, Default)]
pub struct Matrix {
    dim: usize,
    bytes: Vec<i8>,
    scales: Vec<f32>,
}

impl Matrix {
    pub fn rows(&self) -> usize {
        self.scales.len()
    }

    /// Row `row` dotted with `vector` (cosine, both being unit length).
    pub fn dot(&self, row: usize, vector: &[f32]) -> f32 {
        let bytes = &self.bytes[row * self.dim..(row + 1) * self.dim];
        dot(bytes, self.scales[row], vector)
    }

    fn push(&mut self, scale: f32, bytes: &[u8]) {
        self.scales.push(scale);
        self.bytes.extend(bytes.iter().map(|b| *b as i8));
    }
}

/// Where a vector's record lies: which of the store's files, and where.
#[derive(Clone, Copy)]
struct Place {
    file: u32,
    offset: u64,
}

/// The vectors of one model: where each lies in the files read, and the
/// file appended to.
pub struct Store {
    digest: [u8; 32],
    dim: usize,
    places: HashMap<TextHash, Place>,
    /// The seeds read, then the file new vectors go to (last).
    files: Vec<PathBuf>,
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
            places: HashMap::new(),
            files: Vec::new(),
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
            std::fs::write(file, store.header())
                .with_context(|| format!("writing {}", file.display()))?;
            store.files.push(file.to_path_buf());
        }
        Ok((store, notes))
    }

    fn record_len(&self) -> usize {
        32 + 4 + self.dim
    }

    fn header(&self) -> Vec<u8> {
        let mut header = Vec::with_capacity(HEADER);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&self.digest);
        header.extend_from_slice(&(self.dim as u32).to_le_bytes());
        header
    }

    /// `path`'s bytes, when it is a store of this model.
    fn contents(&self, path: &Path) -> Result<Vec<u8>> {
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
        Ok(data)
    }

    /// Note where every whole record of `path` lies; how many.
    fn read(&mut self, path: &Path) -> Result<usize> {
        let data = self.contents(path)?;
        let file = self.files.len() as u32;
        let mut count = 0;
        for (i, record) in data[HEADER..].chunks_exact(self.record_len()).enumerate() {
            let hash: TextHash = record[..32].try_into().expect("32 bytes");
            let scale = f32::from_le_bytes(record[32..36].try_into().expect("4 bytes"));
            if !scale.is_finite() {
                continue;
            }
            let offset = (HEADER + i * self.record_len()) as u64;
            self.places.insert(hash, Place { file, offset });
            count += 1;
        }
        self.files.push(path.to_path_buf());
        Ok(count)
    }

    pub fn contains(&self, hash: &TextHash) -> bool {
        self.places.contains_key(hash)
    }

    pub fn len(&self) -> usize {
        self.places.len()
    }

    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// The vectors of `hashes`, in their order, read from the files; the
    /// positions in `hashes` of those the store lacks (or that a file no
    /// longer holds: it changed under us) are left out and returned.
    pub fn matrix(&self, hashes: &[TextHash]) -> Result<(Matrix, Vec<usize>)> {
        let mut matrix = Matrix {
            dim: self.dim,
            bytes: Vec::with_capacity(hashes.len() * self.dim),
            scales: Vec::with_capacity(hashes.len()),
        };
        let mut lacking = Vec::new();
        // Each file read once, dropped before the next.
        let mut by_file: Vec<Vec<(usize, u64)>> = vec![Vec::new(); self.files.len()];
        for (i, hash) in hashes.iter().enumerate() {
            match self.places.get(hash) {
                Some(place) => by_file[place.file as usize].push((i, place.offset)),
                None => lacking.push(i),
            }
        }
        let mut found: Vec<Option<(f32, Vec<u8>)>> = vec![None; hashes.len()];
        for (file, wanted) in by_file.iter().enumerate() {
            if wanted.is_empty() {
                continue;
            }
            let data = self.contents(&self.files[file])?;
            for (i, offset) in wanted {
                let at = *offset as usize;
                let record = data.get(at..at + self.record_len());
                match record.filter(|r| r[..32] == hashes[*i]) {
                    Some(r) => {
                        let scale = f32::from_le_bytes(r[32..36].try_into().expect("4 bytes"));
                        found[*i] = Some((scale, r[36..].to_vec()));
                    }
                    None => lacking.push(*i),
                }
            }
        }
        for row in found.into_iter().flatten() {
            matrix.push(row.0, &row.1);
        }
        lacking.sort_unstable();
        Ok((matrix, lacking))
    }

    /// Append `vectors` (text hash, unit vector) to the file, in one write,
    /// and note where they lie.
    pub fn put(&mut self, vectors: Vec<(TextHash, Vec<f32>)>) -> Result<()> {
        let own = self.files.last().expect("the store's own file").clone();
        let mut out = Vec::with_capacity(vectors.len() * self.record_len());
        let mut hashes = Vec::with_capacity(vectors.len());
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
            hashes.push(hash);
        }
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&own)
            .with_context(|| format!("opening {}", own.display()))?;
        let start = file
            .metadata()
            .with_context(|| format!("reading {}", own.display()))?
            .len();
        file.write_all(&out)
            .with_context(|| format!("writing {}", own.display()))?;
        let file_index = (self.files.len() - 1) as u32;
        for (i, hash) in hashes.into_iter().enumerate() {
            let offset = start + (i * self.record_len()) as u64;
            self.places.insert(
                hash,
                Place {
                    file: file_index,
                    offset,
                },
            );
        }
        Ok(())
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
        let hashes = [text_hash("two"), text_hash("none"), text_hash("one")];
        for store in [&store, &again] {
            // In the order asked, what is lacking said by its position.
            let (matrix, lacking) = store.matrix(&hashes).unwrap();
            assert_eq!((matrix.rows(), lacking), (2, vec![1]));
            assert!((matrix.dot(0, &unit(1.0, 8)) - 1.0).abs() < 0.01);
            assert!((matrix.dot(1, &unit(0.0, 8)) - 1.0).abs() < 0.01);
        }
        again.put(vec![(text_hash("three"), unit(2.0, 8))]).unwrap();
        let (again, _) = Store::open([1; 32], 8, &file, &[]).unwrap();
        assert_eq!(again.len(), 3);
        assert!(again.contains(&text_hash("three")) && !again.contains(&text_hash("four")));
        // As a seed of another model it is skipped, with why.
        let other = dir.path().join("b.vec");
        let (seeded, notes) = Store::open([2; 32], 8, &other, std::slice::from_ref(&file)).unwrap();
        assert!(seeded.is_empty());
        assert!(notes[0].contains("another model"), "{notes:?}");
        // As a seed of the same model it is read.
        let (mut seeded, _) =
            Store::open([1; 32], 8, &dir.path().join("c.vec"), &[file.clone()]).unwrap();
        assert_eq!(seeded.len(), 3);
        // New vectors go to its own file; a table takes from both.
        seeded.put(vec![(text_hash("four"), unit(3.0, 8))]).unwrap();
        let (matrix, lacking) = seeded
            .matrix(&[text_hash("four"), text_hash("three")])
            .unwrap();
        assert!(lacking.is_empty());
        assert!((matrix.dot(0, &unit(3.0, 8)) - 1.0).abs() < 0.01);
        assert!((matrix.dot(1, &unit(2.0, 8)) - 1.0).abs() < 0.01);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 44 + 3 * 44);
    }
}
