//! The optimisers as the paper configures them (§3.3): Adafactor with a constant learning
//! rate, no relative step and no parameter scaling; AdamW as the common alternative.

use burn::optim::AdafactorConfig;

/// burn's Adafactor with the paper's settings. The learning rate is supplied per step by the
/// schedule; with `relative_step` off it is used as given.
pub fn adafactor() -> AdafactorConfig {
    AdafactorConfig::new().with_relative_step(false).with_scale_parameter(false)
}
