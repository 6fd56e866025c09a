//! Syntax: octets and text of the standards, with no knowledge of a message's
//! structure. Uses nothing else of the engine.
pub(crate) mod ascii;
pub(crate) mod auth_results;
pub mod cid_url;
pub mod content_location;
pub mod cturi_map;
pub(crate) mod decode;
pub(crate) mod dkim;
pub(crate) mod encoded_words;
pub mod fold;
pub(crate) mod html_refs;
pub(crate) mod image_signature;
pub(crate) mod msgid;
pub(crate) mod params;
pub(crate) mod rfc2231;
pub(crate) mod unreachable;
pub(crate) mod uri;
