//! The example messages a survey keeps (the first in input order of each form or
//! sender), and the order in which forms and senders are listed: shared by the
//! counts of `stats` and `names` and the output of `summary`.

/// The input order of a message: (file, message within the file). Defined here, in
/// the module every other one may use, so that `pool` and `stats` need not import
/// each other.
pub(super) type Seq = (u64, u64);

/// A sender's messages, how many of them the configuration repairs, and the first:
/// (input order, source, Message-ID).
#[derive(Clone)]
pub(super) struct Sender {
    pub(super) messages: u64,
    pub(super) repaired: u64,
    pub(super) example: (Seq, String, Option<String>),
}

/// Where a form or a sender is listed: most messages first, then the one seen first,
/// then by its text. The forms of one message tie on both counts, and the hash map
/// holding them hands them over in another order in every process: without the text,
/// two runs over the same mail could show different forms.
pub(super) fn ranked(messages: u64, first: Seq, text: &str) -> (std::cmp::Reverse<u64>, Seq, &str) {
    (std::cmp::Reverse(messages), first, text)
}

/// Adds the senders one worker counted (`theirs`) to another's (`mine`): counts summed,
/// the example the one first in input order.
pub(super) fn merge_senders<S: std::hash::BuildHasher>(
    mine: &mut std::collections::HashMap<String, Sender, S>,
    theirs: impl IntoIterator<Item = (String, Sender)>,
) {
    for (who, s) in theirs {
        match mine.get_mut(&who) {
            Some(m) => {
                m.messages += s.messages;
                m.repaired += s.repaired;
                if s.example.0 < m.example.0 {
                    m.example = s.example;
                }
            }
            None => {
                mine.insert(who, s);
            }
        }
    }
}
