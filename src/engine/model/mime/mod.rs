//! MIME structure with byte offsets: every heading, every header field, every body.
//!
//! Our own scanner rather than a full parser: fixes need the exact bytes of each field,
//! and the checks never need decoded attachments, so bodies are only searched for
//! boundary delimiters (memmem), never copied or decoded. The walk is iterative, so deep
//! nesting costs heap, not stack, and it stops at the configured limits.
//!
//! Encapsulated messages sent base64- or quoted-printable-encoded are decoded into a
//! side buffer and analysed there; their offsets do not point into the original bytes,
//! so they are marked not editable (`buf != 0`).
//!
//! One job a file; everything public is used as `mime::…`:
//! - `heading`: the heading reader, header fields as byte offsets ([`Field`],
//!   [`fields_read_on`] for readers that go on past a stray line);
//! - `delimiters`: the delimiter index and the multipart split;
//! - `kinds`: what a heading's MIME fields make of its entity (the `CONTENT_…` bits,
//!   the effective type, its [`Kind`]) and the lists of entities by kind;
//! - `tree`: the entity tree and its walk ([`Message`], [`Entity`]), the one file
//!   that uses the others.

mod delimiters;
mod heading;
mod kinds;
mod tree;

pub use heading::{fields_read_on, fields_read_on_by_piece, line_lengths, next_field_start, Field};
pub use kinds::{
    Kind, CONTENT_BASE, CONTENT_DISPOSITION, CONTENT_ID, CONTENT_LOCATION,
    CONTENT_TRANSFER_ENCODING, CONTENT_TYPE,
};
pub use tree::{Entity, Message, Overflow};
