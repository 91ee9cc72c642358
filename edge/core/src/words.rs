//! Enumerations spelled with one word per variant — a policy's `method = "GET"`,
//! `promise = "always_answer"`, an event's `PENDING`. Why a macro: the list of words (which
//! the compiler's parser, its JSON Schema and its error messages read) and the `match` that
//! spells a variant come from one table, the way diagnostic codes do (`codes!` in the
//! compiler). A new variant is one row; nothing can list it or spell it differently, and no
//! hand-kept list lets it pass unseen.

/// Declares `enum $name` from rows `Variant = "word",` (attributes and doc comments kept),
/// with `$name::ALL` (every word with its variant, in declaration order) and `as_str`.
#[macro_export]
macro_rules! words {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $word:literal, )*
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )*
        }

        // Not every enum spells itself outside its parser: `as_str` may go unused.
        #[allow(dead_code)]
        impl $name {
            /// Every variant with its word, in declaration order.
            pub const ALL: &'static [(&'static str, $name)] = &[ $( ($word, $name::$variant), )* ];

            /// The variant's word.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $word, )*
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    crate::words! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Sample {
            One = "one",
            /// Documented.
            Two = "two",
        }
    }

    #[test]
    fn the_list_and_the_spelling_come_from_one_table() {
        assert_eq!(Sample::ALL, [("one", Sample::One), ("two", Sample::Two)]);
        for (word, v) in Sample::ALL {
            assert_eq!(v.as_str(), *word);
        }
    }
}
