//! BERT (`model_type: "bert"`, e.g. sentence-transformers'
//! all-MiniLM-L6-v2) with its weights held compact ([`crate::compact`]):
//! candle-transformers' `BertModel` holds every weight in the one dtype it
//! computes in, so the layers are ours. Written after Hugging Face's
//! `modeling_bert.py`; weight names as it saves them, with or without the
//! `bert.` prefix.

use candle_core::{DType, Module, Result, Tensor};
use candle_nn::{LayerNorm, LayerNormConfig, VarBuilder};
use serde::Deserialize;

use crate::compact::{Dense, Precision, Table};

#[derive(Deserialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
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
        let heads = self.num_attention_heads;
        if heads == 0 || !self.hidden_size.is_multiple_of(heads) {
            candle_core::bail!(
                "num_attention_heads {heads} does not divide hidden_size {}",
                self.hidden_size
            );
        }
        if activation(&self.hidden_act).is_none() {
            candle_core::bail!(
                "hidden_act `{}`: gelu, gelu_new, gelu_pytorch_tanh or relu",
                self.hidden_act
            );
        }
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum Activation {
    /// GELU as BERT was trained with it (the error function).
    Gelu,
    /// GELU's tanh approximation.
    GeluTanh,
    Relu,
}

fn activation(name: &str) -> Option<Activation> {
    match name {
        "gelu" => Some(Activation::Gelu),
        "gelu_new" | "gelu_pytorch_tanh" => Some(Activation::GeluTanh),
        "relu" => Some(Activation::Relu),
        _ => None,
    }
}

pub struct Bert {
    words: Table,
    positions: Table,
    types: Table,
    norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    activation: Activation,
}

struct Layer {
    q: Dense,
    k: Dense,
    v: Dense,
    o: Dense,
    attention_norm: LayerNorm,
    intermediate: Dense,
    output: Dense,
    output_norm: LayerNorm,
}

impl Bert {
    /// The network of `config` ([`Config::check`]ed) with weights from `vb`.
    pub fn load(vb: VarBuilder, config: &Config, p: Precision) -> Result<Bert> {
        let vb = if vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb
        } else {
            vb.pp("bert")
        };
        let hidden = config.hidden_size;
        let norm = |vb: VarBuilder| {
            let eps = LayerNormConfig {
                eps: config.layer_norm_eps,
                ..Default::default()
            };
            let norm = candle_nn::layer_norm(hidden, eps, vb.set_dtype(DType::F32))?;
            Ok::<_, candle_core::Error>(norm)
        };
        let embeddings = vb.pp("embeddings");
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let layer = vb.pp(format!("encoder.layer.{i}"));
                let attention = layer.pp("attention");
                let square = |name: &str| Dense::load(hidden, hidden, attention.pp(name), p);
                Ok(Layer {
                    q: square("self.query")?,
                    k: square("self.key")?,
                    v: square("self.value")?,
                    o: square("output.dense")?,
                    attention_norm: norm(attention.pp("output.LayerNorm"))?,
                    intermediate: Dense::load(
                        hidden,
                        config.intermediate_size,
                        layer.pp("intermediate.dense"),
                        p,
                    )?,
                    output: Dense::load(
                        config.intermediate_size,
                        hidden,
                        layer.pp("output.dense"),
                        p,
                    )?,
                    output_norm: norm(layer.pp("output.LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let table = |rows: usize, name: &str| Table::load(rows, hidden, embeddings.pp(name), p);
        Ok(Bert {
            words: table(config.vocab_size, "word_embeddings")?,
            positions: table(config.max_position_embeddings, "position_embeddings")?,
            types: table(config.type_vocab_size, "token_type_embeddings")?,
            norm: norm(embeddings.pp("LayerNorm"))?,
            layers,
            heads: config.num_attention_heads,
            activation: activation(&config.hidden_act).expect("checked"),
        })
    }

    /// The last layer's states of `ids` (batch × tokens), with their
    /// token types, `mask` 1 where a token is real.
    pub fn forward(&self, ids: &Tensor, types: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (batch, tokens) = ids.dims2()?;
        let device = ids.device();
        let positions = Tensor::arange(0u32, tokens as u32, device)?;
        let embedded = (self.words.forward(ids)? + self.types.forward(types)?)?
            .broadcast_add(&self.positions.forward(&positions)?)?;
        let mut x = self.norm.forward(&embedded)?;
        // Padding out of reach of every query.
        let real = mask.to_dtype(DType::F32)?;
        let padding = ((real.ones_like()? - &real)? * -1e9)?.reshape((batch, 1, 1, tokens))?;
        let hidden = x.dim(2)?;
        let size = hidden / self.heads;
        let scale = 1.0 / (size as f64).sqrt();
        for layer in &self.layers {
            let heads = |t: Tensor| {
                t.reshape((batch, tokens, self.heads, size))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            let q = heads(layer.q.forward(&x)?)?;
            let k = heads(layer.k.forward(&x)?)?;
            let v = heads(layer.v.forward(&x)?)?;
            let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&padding)?;
            let weights = candle_nn::ops::softmax_last_dim(&scores)?;
            let context = weights
                .matmul(&v)?
                .transpose(1, 2)?
                .reshape((batch, tokens, hidden))?;
            let attended = layer
                .attention_norm
                .forward(&(layer.o.forward(&context)? + &x)?)?;
            let inner = layer.intermediate.forward(&attended)?;
            let inner = match self.activation {
                Activation::Gelu => inner.gelu_erf()?,
                Activation::GeluTanh => inner.gelu()?,
                Activation::Relu => inner.relu()?,
            };
            x = layer
                .output_norm
                .forward(&(layer.output.forward(&inner)? + &attended)?)?;
        }
        Ok(x)
    }
}
