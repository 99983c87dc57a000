//! One transformer encoder layer, as BERT and MPNet share it: multi-head
//! self-attention (with whatever bias the network adds to its scores:
//! padding out of reach, and MPNet's relative distances), a residual and
//! layer norm, the feed-forward block, another residual and norm. The two
//! networks differ only in their weights' names ([`Names`]) and in what
//! they add to the scores.

use candle_core::{DType, Module, Result, Tensor};
use candle_nn::{LayerNorm, LayerNormConfig, VarBuilder};
use serde::Deserialize;

use crate::compact::{Dense, Precision};

/// The activation of the feed-forward block.
#[derive(Clone, Copy)]
pub enum Activation {
    /// GELU as BERT was trained with it (the error function).
    Gelu,
    /// GELU's tanh approximation.
    GeluTanh,
    Relu,
}

impl Activation {
    /// The activation a config's `hidden_act` names.
    pub fn named(name: &str) -> Option<Activation> {
        match name {
            "gelu" => Some(Activation::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" => Some(Activation::GeluTanh),
            "relu" => Some(Activation::Relu),
            _ => None,
        }
    }

    fn apply(self, x: &Tensor) -> Result<Tensor> {
        match self {
            Activation::Gelu => x.gelu_erf(),
            Activation::GeluTanh => x.gelu(),
            Activation::Relu => x.relu(),
        }
    }
}

/// Where a network keeps a layer's attention weights, under the layer's
/// `attention.` (the feed-forward block's names are the same in both).
pub struct Names {
    pub q: &'static str,
    pub k: &'static str,
    pub v: &'static str,
    pub o: &'static str,
    pub norm: &'static str,
}

/// What every config.json of the family gives of a network's shape
/// (each network's config takes it in whole, with its own keys beside).
#[derive(Deserialize)]
pub struct Shape {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
}

impl Shape {
    /// Heads that split the hidden size evenly: what the forward pass
    /// divides by.
    pub fn check(&self) -> Result<()> {
        let (heads, hidden) = (self.num_attention_heads, self.hidden_size);
        if heads == 0 || !hidden.is_multiple_of(heads) {
            candle_core::bail!("num_attention_heads {heads} does not divide hidden_size {hidden}");
        }
        Ok(())
    }

    /// The encoder's layers, under `vb`'s `encoder.layer.<i>`.
    pub fn layers(
        &self,
        vb: &VarBuilder,
        names: &Names,
        eps: f64,
        activation: Activation,
        p: Precision,
    ) -> Result<Vec<Layer>> {
        (0..self.num_hidden_layers)
            .map(|i| {
                let vb = vb.pp(format!("encoder.layer.{i}"));
                Layer::load(vb, names, self, eps, activation, p)
            })
            .collect()
    }
}

pub struct Layer {
    q: Dense,
    k: Dense,
    v: Dense,
    o: Dense,
    attention_norm: LayerNorm,
    intermediate: Dense,
    output: Dense,
    output_norm: LayerNorm,
    heads: usize,
    activation: Activation,
}

/// A layer norm of `hidden` values, its weights in f32 whatever the
/// matrices are held in.
pub fn norm(hidden: usize, eps: f64, vb: VarBuilder) -> Result<LayerNorm> {
    let config = LayerNormConfig {
        eps,
        ..Default::default()
    };
    candle_nn::layer_norm(hidden, config, vb.set_dtype(DType::F32))
}

impl Layer {
    /// The layer under `vb` (a network's `encoder.layer.<i>`).
    fn load(
        vb: VarBuilder,
        names: &Names,
        shape: &Shape,
        eps: f64,
        activation: Activation,
        p: Precision,
    ) -> Result<Layer> {
        let (hidden, intermediate) = (shape.hidden_size, shape.intermediate_size);
        let attention = vb.pp("attention");
        let square = |name: &str| Dense::load(hidden, hidden, attention.pp(name), p);
        Ok(Layer {
            q: square(names.q)?,
            k: square(names.k)?,
            v: square(names.v)?,
            o: square(names.o)?,
            attention_norm: norm(hidden, eps, attention.pp(names.norm))?,
            intermediate: Dense::load(hidden, intermediate, vb.pp("intermediate.dense"), p)?,
            output: Dense::load(intermediate, hidden, vb.pp("output.dense"), p)?,
            output_norm: norm(hidden, eps, vb.pp("output.LayerNorm"))?,
            heads: shape.num_attention_heads,
            activation,
        })
    }

    /// The layer's output for `x` (batch × tokens × hidden), `bias` added
    /// to the attention scores (broadcast to batch × heads × tokens ×
    /// tokens).
    pub fn forward(&self, x: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let (batch, tokens, hidden) = x.dims3()?;
        let size = hidden / self.heads;
        let heads = |t: Tensor| {
            t.reshape((batch, tokens, self.heads, size))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = heads(self.q.forward(x)?)?;
        let k = heads(self.k.forward(x)?)?;
        let v = heads(self.v.forward(x)?)?;
        let scale = 1.0 / (size as f64).sqrt();
        let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(bias)?;
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let context = weights
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape((batch, tokens, hidden))?;
        let attended = self
            .attention_norm
            .forward(&(self.o.forward(&context)? + x)?)?;
        let inner = self
            .activation
            .apply(&self.intermediate.forward(&attended)?)?;
        self.output_norm
            .forward(&(self.output.forward(&inner)? + &attended)?)
    }
}
