//! BERT (`model_type: "bert"`, e.g. sentence-transformers'
//! all-MiniLM-L6-v2) with its weights held compact ([`crate::compact`]):
//! candle-transformers' `BertModel` holds every weight in the one dtype it
//! computes in, so the layers are ours. Written after Hugging Face's
//! `modeling_bert.py`; weight names as it saves them, with or without the
//! `bert.` prefix.

use candle_core::{DType, Module, Result, Tensor};
use candle_nn::{LayerNorm, VarBuilder};
use serde::Deserialize;

use crate::compact::{Precision, Table};
use crate::layer::{self, Activation, Layer, Names, Shape};

#[derive(Deserialize)]
pub struct Config {
    #[serde(flatten)]
    pub shape: Shape,
    #[serde(default = "two")]
    pub type_vocab_size: usize,
    #[serde(default = "eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "gelu")]
    pub hidden_act: String,
}

fn two() -> usize {
    2
}
fn eps() -> f64 {
    1e-12
}
fn gelu() -> String {
    "gelu".into()
}

impl Config {
    /// What the forward pass needs: heads that split the hidden size
    /// evenly and an activation it knows.
    pub fn check(&self) -> Result<()> {
        self.shape.check()?;
        if Activation::named(&self.hidden_act).is_none() {
            candle_core::bail!(
                "hidden_act `{}`: gelu, gelu_new, gelu_pytorch_tanh or relu",
                self.hidden_act
            );
        }
        Ok(())
    }
}

pub struct Bert {
    words: Table,
    positions: Table,
    types: Table,
    norm: LayerNorm,
    layers: Vec<Layer>,
}

/// Where BERT keeps a layer's attention weights.
const NAMES: Names = Names {
    q: "self.query",
    k: "self.key",
    v: "self.value",
    o: "output.dense",
    norm: "output.LayerNorm",
};

impl Bert {
    /// The network of `config` ([`Config::check`]ed) with weights from `vb`.
    pub fn load(vb: VarBuilder, config: &Config, p: Precision) -> Result<Bert> {
        let vb = if vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb
        } else {
            vb.pp("bert")
        };
        let shape = &config.shape;
        let hidden = shape.hidden_size;
        let activation = Activation::named(&config.hidden_act).expect("checked");
        let layers = shape.layers(&vb, &NAMES, config.layer_norm_eps, activation, p)?;
        let embeddings = vb.pp("embeddings");
        let table = |rows: usize, name: &str| Table::load(rows, hidden, embeddings.pp(name), p);
        Ok(Bert {
            words: table(shape.vocab_size, "word_embeddings")?,
            positions: table(shape.max_position_embeddings, "position_embeddings")?,
            types: table(config.type_vocab_size, "token_type_embeddings")?,
            norm: layer::norm(hidden, config.layer_norm_eps, embeddings.pp("LayerNorm"))?,
            layers,
        })
    }

    /// The last layer's states of `ids` (batch × tokens), with their
    /// token types, `mask` 1 where a token is real.
    pub fn forward(&self, ids: &Tensor, types: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (batch, tokens) = ids.dims2()?;
        let positions = Tensor::arange(0u32, tokens as u32, ids.device())?;
        let embedded = (self.words.forward(ids)? + self.types.forward(types)?)?
            .broadcast_add(&self.positions.forward(&positions)?)?;
        let mut x = self.norm.forward(&embedded)?;
        // Padding out of reach of every query.
        let real = mask.to_dtype(DType::F32)?;
        let padding = ((real.ones_like()? - &real)? * -1e9)?.reshape((batch, 1, 1, tokens))?;
        for layer in &self.layers {
            x = layer.forward(&x, &padding)?;
        }
        Ok(x)
    }
}
