//! The one implementation of a closed set's names: `Display` and `FromStr` (an unknown name is an
//! [`Error::Invalid`](crate::error::Error::Invalid) listing the accepted ones) and, on request,
//! serde as the same names, for any enum with `ALL` and `name()`. The pooling variants, the
//! arithmetic and an index's quantization use it.

/// `by_name!(Type, "what", "the accepted names")` implements `Display` and `FromStr` from
/// `Type::ALL` and `Type::name`; a trailing `serde` adds `Serialize` and `Deserialize` as the
/// name.
macro_rules! by_name {
    ($ty:ty, $what:literal, $expected:literal) => {
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::error::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::ALL.into_iter().find(|v| v.name() == s).ok_or_else(|| {
                    $crate::error::Error::Invalid(format!(
                        concat!("unknown ", $what, " `{}` (expected ", $expected, ")"),
                        s
                    ))
                })
            }
        }
    };
    ($ty:ty, $what:literal, $expected:literal, serde) => {
        $crate::by_name::by_name!($ty, $what, $expected);

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                name.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use by_name;
