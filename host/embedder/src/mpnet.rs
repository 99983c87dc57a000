//! MPNet (`model_type: "mpnet"`, e.g. sentence-transformers'
//! all-mpnet-base-v2), which candle-transformers does not have: BERT's
//! layers without token types, with a learned bias per head for each
//! bucket of relative distance added to every layer's attention. Written
//! after Hugging Face's `modeling_mpnet.py`; weight names as it saves them.

use candle_core::{DType, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, VarBuilder};
use serde::Deserialize;

use crate::compact::{Precision, Table};
use crate::layer::{self, Activation, Layer, Names, Shape};

#[derive(Deserialize)]
pub struct Config {
    #[serde(flatten)]
    pub shape: Shape,
    pub layer_norm_eps: f64,
    pub pad_token_id: u32,
    pub relative_attention_num_buckets: usize,
}

impl Config {
    /// What the forward pass divides by: heads that split the hidden
    /// size evenly, and buckets for both directions.
    pub fn check(&self) -> Result<()> {
        self.shape.check()?;
        if self.relative_attention_num_buckets < 4 {
            candle_core::bail!(
                "relative_attention_num_buckets is {}: MPNet needs at least 4",
                self.relative_attention_num_buckets
            );
        }
        Ok(())
    }
}

/// Distances from here on share the last bucket (as the model was trained).
const MAX_DISTANCE: f64 = 128.0;

pub struct MpNet {
    words: Table,
    positions: Table,
    norm: LayerNorm,
    layers: Vec<Layer>,
    /// Per relative-distance bucket, a bias for each head.
    relative_bias: Embedding,
    pad: u32,
    buckets: usize,
}

/// Where MPNet keeps a layer's attention weights.
const NAMES: Names = Names {
    q: "attn.q",
    k: "attn.k",
    v: "attn.v",
    o: "attn.o",
    norm: "LayerNorm",
};

impl MpNet {
    /// The network of `config` ([`Config::check`]ed) with weights from `vb`.
    pub fn load(vb: VarBuilder, config: &Config, p: Precision) -> Result<MpNet> {
        let shape = &config.shape;
        let hidden = shape.hidden_size;
        let embeddings = vb.pp("embeddings");
        let layers = shape.layers(&vb, &NAMES, config.layer_norm_eps, Activation::Gelu, p)?;
        Ok(MpNet {
            words: Table::load(
                shape.vocab_size,
                hidden,
                embeddings.pp("word_embeddings"),
                p,
            )?,
            positions: Table::load(
                shape.max_position_embeddings,
                hidden,
                embeddings.pp("position_embeddings"),
                p,
            )?,
            norm: layer::norm(hidden, config.layer_norm_eps, embeddings.pp("LayerNorm"))?,
            layers,
            relative_bias: candle_nn::embedding(
                config.relative_attention_num_buckets,
                shape.num_attention_heads,
                vb.pp("encoder.relative_attention_bias")
                    .set_dtype(DType::F32),
            )?,
            pad: config.pad_token_id,
            buckets: config.relative_attention_num_buckets,
        })
    }

    /// The last layer's states of `ids` (batch × tokens), `mask` 1 where
    /// a token is real.
    pub fn forward(&self, ids: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (batch, tokens) = ids.dims2()?;
        let device = ids.device();
        let real = mask.to_dtype(DType::F32)?;
        // Positions count real tokens from pad + 1, as RoBERTa's do.
        let positions = ((real.cumsum(1)? * &real)? + f64::from(self.pad))?.to_dtype(DType::U32)?;
        let mut x = self
            .norm
            .forward(&(self.words.forward(ids)? + self.positions.forward(&positions)?)?)?;
        let buckets: Vec<u32> = (0..tokens)
            .flat_map(|i| (0..tokens).map(move |j| (i, j)))
            .map(|(i, j)| bucket(j as i64 - i as i64, self.buckets))
            .collect();
        let buckets = Tensor::from_vec(buckets, (tokens, tokens), device)?;
        // batch × heads × tokens × tokens: the distances' bias, and padding
        // out of reach.
        let distance = self
            .relative_bias
            .forward(&buckets)?
            .permute((2, 0, 1))?
            .unsqueeze(0)?;
        let padding = ((real.ones_like()? - &real)? * -1e9)?.reshape((batch, 1, 1, tokens))?;
        let bias = distance.broadcast_add(&padding)?;
        for layer in &self.layers {
            x = layer.forward(&x, &bias)?;
        }
        Ok(x)
    }
}

/// The bucket of a key `relative` tokens after the query: half the
/// buckets for each direction, exact up to a quarter of them, then
/// logarithmic up to [`MAX_DISTANCE`].
fn bucket(relative: i64, buckets: usize) -> u32 {
    let half = (buckets / 2) as i64;
    let exact = half / 2;
    let ahead = -relative;
    let side = if ahead < 0 { half } else { 0 };
    let n = ahead.abs();
    let within = if n < exact {
        n
    } else {
        let far = ((n as f64 / exact as f64).ln() / (MAX_DISTANCE / exact as f64).ln()
            * (half - exact) as f64) as i64;
        (exact + far).min(half - 1)
    };
    (side + within) as u32
}

#[cfg(test)]
mod tests {
    use super::{Config, Shape, bucket};

    #[test]
    fn a_config_the_forward_pass_cannot_divide_by_is_refused() {
        let config = |heads: usize, buckets: usize| Config {
            shape: Shape {
                vocab_size: 10,
                hidden_size: 768,
                num_hidden_layers: 1,
                num_attention_heads: heads,
                intermediate_size: 8,
                max_position_embeddings: 8,
            },
            layer_norm_eps: 1e-5,
            pad_token_id: 1,
            relative_attention_num_buckets: buckets,
        };
        assert!(config(12, 32).check().is_ok());
        let error = config(0, 32).check().unwrap_err().to_string();
        assert!(error.contains("num_attention_heads 0"), "{error}");
        assert!(config(7, 32).check().is_err());
        let error = config(12, 0).check().unwrap_err().to_string();
        assert!(error.contains("at least 4"), "{error}");
    }

    #[test]
    fn distances_fall_in_the_buckets_the_model_was_trained_with() {
        // Values of Hugging Face's `relative_position_bucket` (32 buckets,
        // max distance 128) for keys before (negative) and after the query.
        let expected = [
            (0, 0),
            (-1, 1),
            (-7, 7),
            (-8, 8),
            (-12, 9),
            (-16, 10),
            (-127, 15),
            (-500, 15),
            (1, 17),
            (7, 23),
            (8, 24),
            (20, 26),
            (200, 31),
        ];
        for (relative, want) in expected {
            assert_eq!(bucket(relative, 32), want, "distance {relative}");
        }
    }
}
