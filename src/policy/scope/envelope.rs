//! What scopes match a message on beside its header fields: the envelope of its
//! transaction. Recipients are kept as the set of scopes their address matches
//! ([`Recipients`]), not as text: a transaction with thousands of recipients costs a
//! few words per distinct combination.

use std::net::IpAddr;

use super::Scopes;
use crate::policy::matching::normalize_address;

/// The envelope recipients of one transaction, as the scopes they satisfy; the type
/// of [`Envelope::recipients`], public as `mimeref_milter::Recipients`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recipients {
    pub(super) words: usize,
    /// Distinct bit sets, sorted.
    pub(super) masks: Vec<Box<[u64]>>,
    pub(super) count: usize,
}

impl Recipients {
    /// One RCPT argument (`<bob@example.org>`), against `scopes` (those the recipients
    /// were made for).
    pub fn add(&mut self, scopes: &Scopes, arg: &[u8]) {
        self.words = scopes.list.len().div_ceil(64);
        self.count += 1;
        let m = scopes.mask(Some(&normalize_address(arg)));
        if let Err(at) = self.masks.binary_search(&m) {
            self.masks.insert(at, m);
        }
    }

    /// Recipients added so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Whether these were collected against scopes of the same length.
    pub(super) fn fits(&self, scopes: &Scopes) -> bool {
        self.words == scopes.list.len().div_ceil(64)
    }
}

/// What the scopes match on, besides the message's own header fields.
#[derive(Debug, Clone, Default)]
pub struct Envelope {
    /// MAIL FROM as `normalize_address` gives it (`""`: the null sender); None when
    /// not known.
    pub sender: Option<String>,
    pub recipients: Recipients,
    pub client_addr: Option<IpAddr>,
    /// `{auth_authen}`.
    pub sasl_login: Option<String>,
    /// Header fields that count as the message's own for matching (the offline
    /// commands' `--header`); the daemon has none.
    pub extra_headers: Vec<(String, Vec<u8>)>,
}
