//! The layers that hold a sentence model's weights, kept small in memory
//! where it costs no speed (issue 73): a model resident beside an index
//! must fit the Godot seed's budget, and its fp32 weights took most of it.
//!
//! - [`Table`]: an embedding table (half of MiniLM's weights) held at a
//!   byte per value with one scale per row, the rows a batch needs turned
//!   back into f32 when it is looked up. A table is read a row per token,
//!   never multiplied, so its values need less precision than a matrix's,
//!   and a lookup costs nothing measurable.
//! - [`Dense`]: a linear layer, its matrix in [`Precision::matrix`]'s
//!   dtype. The host keeps matrices in f32: held in half precision (the
//!   `gemm` crate's f16 kernels, f32 sums) they took 20 MiB less but a
//!   question took 2.5x as long on this CPU (p50 21.2 against 8.4 ms,
//!   `cargo bench -p embedder --bench models`, 2026-12-02: the f16 path
//!   converts every weight on every product, and a question is a product
//!   of a few rows).
//!
//! `host/embedder/tests/model.rs` checks the vectors stay those of the
//! full-precision model. [`Precision::Full`] keeps the tables in f32 too:
//! the baseline `cargo bench -p embedder --bench models` measures against.

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::VarBuilder;

use crate::store::Quantized;

/// How a model's weights are held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// Tables a byte per value: the host's.
    Compact,
    /// Everything in f32, as the model was trained.
    Full,
}

impl Precision {
    /// The dtype matrices are held (and loaded) in: f32 both ways (see
    /// the module's note on half precision).
    pub fn matrix(self) -> DType {
        DType::F32
    }
}

pub struct Dense {
    /// `out × in`, in [`Precision::matrix`]'s dtype.
    weight: Tensor,
    /// `out`, f32.
    bias: Tensor,
}

impl Dense {
    /// The layer `vb.weight` (`out × in`) and `vb.bias` (`out`).
    pub fn load(inputs: usize, outputs: usize, vb: VarBuilder, p: Precision) -> Result<Dense> {
        let weight = vb.get((outputs, inputs), "weight")?.to_dtype(p.matrix())?;
        let bias = vb.get(outputs, "bias")?.to_dtype(DType::F32)?;
        Ok(Dense { weight, bias })
    }
}

impl Module for Dense {
    /// `x` (`… × in`, f32) times the matrix, plus the bias: `… × out`, f32.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        // As rows of one 2-D product: the transposed matrix is read in
        // place (a broadcast one was copied whole on every call: half of
        // a question's time).
        let dims = x.dims().to_vec();
        let inputs = *dims.last().expect("a layer's input has a last dimension");
        let rows = x.elem_count() / inputs.max(1);
        let product = x
            .reshape((rows, inputs))?
            .to_dtype(self.weight.dtype())?
            .matmul(&self.weight.t()?)?
            .to_dtype(DType::F32)?;
        let mut shape = dims;
        *shape.last_mut().expect("checked") = self.weight.dim(0)?;
        product.broadcast_add(&self.bias)?.reshape(shape)
    }
}

pub struct Table {
    /// `rows × width` values, a byte each: `value ≈ byte × scales[row]`.
    bytes: Vec<i8>,
    scales: Vec<f32>,
    /// The same values in f32 instead ([`Precision::Full`]).
    full: Vec<f32>,
    rows: usize,
    width: usize,
}

impl Table {
    /// The table `vb.weight` (`rows × width`).
    pub fn load(rows: usize, width: usize, vb: VarBuilder, p: Precision) -> Result<Table> {
        let weight = vb.get((rows, width), "weight")?;
        let mut table = Table {
            bytes: Vec::new(),
            scales: Vec::new(),
            full: Vec::new(),
            rows,
            width,
        };
        if p == Precision::Full {
            table.full = weight.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
            return Ok(table);
        }
        // One row at a time: the whole table never stands in f32 at once.
        let (mut bytes, mut scales) = (Vec::with_capacity(rows * width), Vec::with_capacity(rows));
        for row in 0..rows {
            let values = weight.get(row)?.to_dtype(DType::F32)?.to_vec1::<f32>()?;
            // The store's quantisation of a vector, applied to each row.
            let row = Quantized::new(&values);
            bytes.extend(row.bytes);
            scales.push(row.scale);
        }
        (table.bytes, table.scales) = (bytes, scales);
        Ok(table)
    }

    /// The rows of `ids` (any shape of u32): that shape × width, f32.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let rows = self.rows;
        let flat = ids.flatten_all()?.to_vec1::<u32>()?;
        let mut out = Vec::with_capacity(flat.len() * self.width);
        for id in flat {
            let id = id as usize;
            if id >= rows {
                candle_core::bail!("token id {id} is past the table's {rows} rows");
            }
            let span = id * self.width..(id + 1) * self.width;
            if self.full.is_empty() {
                let scale = self.scales[id];
                out.extend(self.bytes[span].iter().map(|b| *b as f32 * scale));
            } else {
                out.extend_from_slice(&self.full[span]);
            }
        }
        let mut shape = ids.dims().to_vec();
        shape.push(self.width);
        Tensor::from_vec(out, shape, &Device::Cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn builder(tensors: HashMap<String, Tensor>) -> VarBuilder<'static> {
        VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu)
    }

    #[test]
    fn a_dense_layer_gives_the_full_precision_product() {
        let (inputs, outputs) = (48, 20);
        let weight: Vec<f32> = (0..inputs * outputs)
            .map(|i| ((i as f32) * 0.37).sin() * 0.2)
            .collect();
        let bias: Vec<f32> = (0..outputs).map(|i| i as f32 * 0.01).collect();
        let w = Tensor::from_vec(weight, (outputs, inputs), &Device::Cpu).unwrap();
        let b = Tensor::from_vec(bias, outputs, &Device::Cpu).unwrap();
        let full = candle_nn::Linear::new(w.clone(), Some(b.clone()));
        let tensors = HashMap::from([("weight".to_string(), w), ("bias".to_string(), b)]);
        let dense = Dense::load(inputs, outputs, builder(tensors), Precision::Compact).unwrap();
        let x = Tensor::randn(0f32, 1.0, (2, 5, inputs), &Device::Cpu).unwrap();
        let want = full.forward(&x).unwrap();
        let got = dense.forward(&x).unwrap();
        let off = (want - got).unwrap().abs().unwrap().max_all().unwrap();
        assert!(off.to_scalar::<f32>().unwrap() < 0.01);
    }

    #[test]
    fn a_table_gives_back_its_rows_to_a_byte_and_refuses_an_id_past_them() {
        let (rows, width) = (6, 10);
        let values: Vec<f32> = (0..rows * width)
            .map(|i| ((i as f32) * 1.3).cos())
            .collect();
        let weight = Tensor::from_vec(values.clone(), (rows, width), &Device::Cpu).unwrap();
        let table = Table::load(
            rows,
            width,
            builder(HashMap::from([("weight".to_string(), weight)])),
            Precision::Compact,
        )
        .unwrap();
        let ids = Tensor::new(&[[5u32, 0], [2, 2]], &Device::Cpu).unwrap();
        let got = table.forward(&ids).unwrap();
        assert_eq!(got.dims(), &[2, 2, width]);
        let got = got.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (k, id) in [5usize, 0, 2, 2].iter().enumerate() {
            for j in 0..width {
                let (a, b) = (got[k * width + j], values[id * width + j]);
                assert!((a - b).abs() < 1.0 / 127.0, "{a} vs {b}");
            }
        }
        let past = Tensor::new(&[6u32], &Device::Cpu).unwrap();
        let error = table.forward(&past).unwrap_err().to_string();
        assert!(error.contains("token id 6"), "{error}");
    }
}
