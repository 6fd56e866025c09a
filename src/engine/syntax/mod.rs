//! Syntax: octets and text of the standards, with no knowledge of a message's structure.
pub mod ascii;
pub mod cid;
pub mod cturi;
pub mod decode;
pub mod fold;
pub mod msgid;
pub mod params;
pub mod resolve;
pub mod uri;
