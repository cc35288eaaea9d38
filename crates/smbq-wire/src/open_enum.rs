//! Open protocol registries: a newtype over the wire integer with named constants, so an
//! unknown value stays data instead of failing to parse. `Debug` prints the name when known.

/// Declares `pub struct $name(pub $ty)` with associated constants and a name-printing `Debug`.
#[macro_export]
macro_rules! open_enum {
    ($(#[$meta:meta])* $name:ident($ty:ty) { $($(#[$cmeta:meta])* $konst:ident = $val:expr),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub $ty);

        impl $name {
            $($(#[$cmeta])* pub const $konst: Self = Self($val);)*

            /// The registry name of this value, if it is a known one.
            pub fn name(self) -> Option<&'static str> {
                match self {
                    $(Self::$konst => Some(stringify!($konst)),)*
                    _ => None,
                }
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}({:#x})", stringify!($name), self.0),
                }
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Debug::fmt(self, f)
            }
        }
    };
}
