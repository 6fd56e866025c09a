//! Syntax: octets and text of the standards, with no knowledge of a message's
//! structure. Uses nothing else of the engine.
pub(crate) mod ascii;
pub mod cid;
pub mod cturi;
pub(crate) mod decode;
pub mod fold;
pub(crate) mod html;
pub(crate) mod msgid;
pub(crate) mod params;
pub mod resolve;
pub(crate) mod uri;
