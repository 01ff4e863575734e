//! The rescoring stage's session: a batch of candidate patches in, one probability each out.

use ndarray::Array5;
use ort::session::Session;

use super::session::{
    Cause, EngineOptions, InferError, check_input, check_output, open_session, run_cancellable,
};
use tessera_plan::device::CancelToken;
use tessera_plan::model::{Model, Precision};

/// The card's rescoring classifier on one device (its ONNX file is fp32 whatever the run's
/// precision).
#[derive(Debug)]
pub struct PatchClassifier {
    session: Session,
    input: String,
    output: String,
}

impl PatchClassifier {
    /// Opens the rescoring stage of `model`; `None` when its card has none.
    pub fn new(model: &Model, options: &EngineOptions<'_>) -> Result<Option<Self>, InferError> {
        let (Some(spec), Some((path, _))) = (&model.card.rescore, &model.rescore_file) else {
            return Ok(None);
        };
        let name = format!("{} (rescoring stage)", model.card.name);
        let options = EngineOptions {
            precision: Precision::Fp32,
            ..*options
        };
        let (session, _, _) = open_session(path, &name, &options)?;
        check_input(&session, &name, &spec.input)?;
        check_output(&session, &name, &spec.output)?;
        Ok(Some(Self {
            session,
            input: spec.input.clone(),
            output: spec.output.clone(),
        }))
    }

    /// Scores `patches` (`[n, 1, p, p, p]`, normalised): one probability per patch, in order.
    pub fn run(
        &mut self,
        patches: Array5<f32>,
        cancel: &CancelToken,
    ) -> Result<Vec<f32>, InferError> {
        let n = patches.shape()[0];
        let fail = |cause: Cause| InferError::Rescore { cause };
        let output = self.output.as_str();
        run_cancellable(
            &mut self.session,
            &self.input,
            patches,
            cancel,
            &fail,
            |out| {
                let scores = out[output]
                    .try_extract_array::<f32>()
                    .map_err(|e| fail(e.into()))?;
                if scores.len() != n {
                    return Err(fail(Cause::Found(format!(
                        "output {output} has shape {:?}; {n} patches need {n} scores",
                        scores.shape()
                    ))));
                }
                Ok(scores.iter().copied().collect())
            },
        )
    }
}
