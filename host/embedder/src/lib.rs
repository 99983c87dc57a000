//! Sentence embeddings for the host's `vectors` capability, in pure Rust.
//!
//! - [`model`]: a BERT-family sentence model from a folder
//!   (`config.json`, `tokenizer.json`, `model.safetensors`, the layout of
//!   sentence-transformers' models), run with candle: texts in, unit
//!   vectors out (mean pooling, as the model was trained); BERT through
//!   [`bert`] and MPNet (all-mpnet-base-v2) through [`mpnet`], both with
//!   their embedding tables held compact ([`compact`]: a byte per value).
//! - [`store`]: vectors kept on disk keyed by the hash of their text, one
//!   file per model, quantised to 8 bits: what is embedded once is never
//!   embedded again, and a file built elsewhere (shipped with a corpus)
//!   can be read beside it; in memory only where each lies, the vectors a
//!   table needs read into one [`Matrix`].
//!
//! No wasmtime and no tokio here: the host decides when and where this
//! runs (a low-priority thread of its own).

mod bert;
mod compact;
mod layer;
pub mod model;
mod mpnet;
pub mod store;

pub use model::Model;
pub use store::{Matrix, Quantized, Store, TextHash, text_hash};
