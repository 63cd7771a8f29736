//! How a batch's texts share the model's matrices, by name: one closed set, parsed once at the
//! edge (`st5 --batching`). Acting on it is st5-core's (`SentenceModel::embed_ids_as`).

use crate::by_name::by_name;

/// A batch's layout on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Batching {
    /// Packed without padding on the CPU (each text's rows one after another; attention and
    /// pooling per text): a text's vector is the same bits whatever it is batched with, and no
    /// padding token is computed. Padded on a GPU, whose fused kernels take one length per batch.
    #[default]
    Auto,
    /// Padded to the batch's longest text everywhere: a GPU's layout, on the CPU only to compare
    /// against (a text's vector then depends, in its last bits, on its batch).
    Padded,
}

impl Batching {
    pub const ALL: [Batching; 2] = [Batching::Auto, Batching::Padded];

    pub fn name(self) -> &'static str {
        match self {
            Batching::Auto => "auto",
            Batching::Padded => "padded",
        }
    }
}

by_name!(Batching, "batching", "auto or padded", serde);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for b in Batching::ALL {
            assert_eq!(b.to_string().parse::<Batching>().unwrap(), b);
        }
        for bad in ["packed", "Padded", ""] {
            let err = bad.parse::<Batching>().unwrap_err().to_string();
            assert!(err.contains("expected auto or padded"), "{bad:?}: {err}");
        }
    }
}
