//! A sentence-embedding model from a folder, run with candle on the CPU.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use sha2::{Digest, Sha256};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::bert::{self, Bert};
use crate::compact::Precision;
use crate::mpnet::{self, MpNet};

/// The networks a model folder may hold, by its config's `model_type`.
enum Encoder {
    /// BERT and its kin (all-MiniLM-L6-v2).
    Bert(Bert),
    /// MPNet (all-mpnet-base-v2).
    MpNet(MpNet),
}

/// The files a model folder must hold.
pub const FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Texts are cut to this many tokens: documents are meant to be short
/// (a name and a sentence or two), and attention costs grow with the
/// square of the length (memory too: 8 × 128² × 12 heads stays small).
pub const MAX_TOKENS: usize = 128;

pub struct Model {
    encoder: Encoder,
    tokenizer: Tokenizer,
    dim: usize,
    /// SHA-256 of the three files: vectors of one model are not another's.
    digest: [u8; 32],
    folder: PathBuf,
}

impl Model {
    /// Load the model in `folder`, its weights held compact. Errors say
    /// which file is missing or wrong.
    pub fn load(folder: &Path) -> Result<Model> {
        Model::load_as(folder, Precision::Compact)
    }

    /// Load the model in `folder` with its weights held in f32 throughout:
    /// the baseline the compact weights are measured against.
    pub fn load_full_precision(folder: &Path) -> Result<Model> {
        Model::load_as(folder, Precision::Full)
    }

    fn load_as(folder: &Path, precision: Precision) -> Result<Model> {
        for file in FILES {
            if !folder.join(file).is_file() {
                bail!(
                    "{} holds no {file}: a sentence-transformers model folder holds {} \
                     (scripts/setup-model fetches one)",
                    folder.display(),
                    FILES.join(", ")
                );
            }
        }
        let read = |file: &str| {
            std::fs::read(folder.join(file))
                .with_context(|| format!("reading {}", folder.join(file).display()))
        };
        let (config, tokenizer, weights) = (
            read("config.json")?,
            read("tokenizer.json")?,
            read("model.safetensors")?,
        );
        let mut hasher = Sha256::new();
        for part in [&config, &tokenizer, &weights] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
        let digest: [u8; 32] = hasher.finalize().into();
        let kind: serde_json::Value = serde_json::from_slice(&config)
            .with_context(|| format!("{}/config.json is not JSON", folder.display()))?;
        let mpnet = kind["model_type"] == "mpnet";
        let what = if mpnet { "an MPNet" } else { "a BERT" };
        let not_one = || format!("{}/config.json is not {what} config", folder.display());
        let mut tokenizer = Tokenizer::from_bytes(&tokenizer).map_err(|e| {
            anyhow::anyhow!("{}/tokenizer.json cannot be read: {e}", folder.display())
        })?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| anyhow::anyhow!("tokenizer truncation: {e}"))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        // The weights are copied into tensors (tables a byte per value:
        // `compact`); the file's bytes go when the builder does.
        let vb = VarBuilder::from_buffered_safetensors(weights, precision.matrix(), &Device::Cpu)?;
        let not_weights = || format!("{}/model.safetensors is not {what} model", folder.display());
        let (encoder, dim) = if mpnet {
            let config: mpnet::Config = serde_json::from_slice(&config).with_context(not_one)?;
            config.check().with_context(not_one)?;
            let model = MpNet::load(vb, &config, precision).with_context(not_weights)?;
            (Encoder::MpNet(model), config.shape.hidden_size)
        } else {
            let config: bert::Config = serde_json::from_slice(&config).with_context(not_one)?;
            config.check().with_context(not_one)?;
            let model = Bert::load(vb, &config, precision).with_context(not_weights)?;
            (Encoder::Bert(model), config.shape.hidden_size)
        };
        Ok(Model {
            encoder,
            tokenizer,
            dim,
            digest,
            folder: folder.to_path_buf(),
        })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// The folder's name, for messages and `godot.versions`.
    pub fn name(&self) -> String {
        folder_name(&self.folder)
    }

    /// Unit vectors of `texts` (one batch: the caller keeps batches small),
    /// mean-pooled over each text's tokens.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?;
        let rows = |pick: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> Result<Tensor> {
            let rows: Vec<Tensor> = encodings
                .iter()
                .map(|e| Tensor::new(pick(e), &Device::Cpu))
                .collect::<candle_core::Result<_>>()?;
            Ok(Tensor::stack(&rows, 0)?)
        };
        let ids = rows(&|e| e.get_ids())?;
        let mask = rows(&|e| e.get_attention_mask())?;
        let out = match &self.encoder {
            Encoder::Bert(bert) => bert.forward(&ids, &rows(&|e| e.get_type_ids())?, &mask)?,
            Encoder::MpNet(mpnet) => mpnet.forward(&ids, &mask)?,
        };
        // Mean over the tokens the mask keeps (padding left out).
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = out.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
        let unit = mean.broadcast_div(&norms)?;
        Ok(unit.to_vec2::<f32>()?)
    }
}

/// A model folder's name (`all-minilm-l6-v2`), or the whole path when it
/// has none: what names a model before and after it is loaded.
pub fn folder_name(folder: &Path) -> String {
    folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| folder.display().to_string())
}
