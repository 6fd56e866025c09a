//! References that reach people wrong or not at all (the catalogue's "Parts shown as the
//! sender meant"): what the `html` check recorded (`Context::refs`, the references that
//! lead to parts; `HtmlPart::outside`, those that lead neither to a part nor to the
//! network), held against the parts and the readers:
//!
//! - `image_type`: `ref-image-type`, an image the HTML shows whose Content-Type is not
//!   an image's, or another image's than its content
//! - `unreachable`: `ref-unreachable`, an image or style sheet only the sender's
//!   machine could load (`blob:`, `file:`, `imap:`, loopback hosts…)
//! - `data_uri`: `ref-data-uri`, `<img src="data:…">`
//! - `escaped_cid`: `cid-ref-escaped`, a `cid:` reference that finds its part only
//!   %-decoded, or that holds white space
//!
//! Only `image_type` has a repair (the part's media type); the others would need the
//! HTML changed. It runs before the rules of what readers show of inline parts
//! (`checks::inline`), which judge a part as the repair leaves it (`Context::retyped`).

mod data_uri;
mod escaped_cid;
mod image_type;
mod unreachable;

use crate::engine::model::analysis::Context;

/// Runs the four rules, after the `html` check has recorded the references.
pub fn check(cx: &mut Context) {
    if cx.html_parts.is_empty() {
        return;
    }
    image_type::check(cx);
    unreachable::check(cx);
    data_uri::check(cx);
    escaped_cid::check(cx);
}

/// Whether a reference found at `place` (`tag@attribute`, or `style` for a `<style>`
/// element) shows an image: `<img>`, `<input type=image>` (the only `<input>` with a
/// `src`), any `background=`, and CSS `url()` in a style attribute or element.
fn shows_image(place: &str) -> bool {
    let (tag, attr) = place.split_once('@').unwrap_or((place, ""));
    matches!(
        (tag, attr),
        ("img", "src" | "lowsrc" | "srcset") | ("input", "src") | (_, "background" | "style")
    ) || place == "style"
}

/// Whether it loads an image or a style sheet: [`shows_image`], `@import`, `<link
/// href>` and a video's poster image.
fn loads_image_or_style(place: &str) -> bool {
    shows_image(place) || matches!(place, "style@import" | "link@href" | "video@poster")
}

#[cfg(test)]
mod tests;
