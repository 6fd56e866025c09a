//! `ref-data-uri`: `<img src="data:…">`, an image carried in the HTML itself.
//!
//! Editors that paste an image as its octets write it (web composers, Symfony users
//! turning base64 images into embedded ones because of it, symfony/symfony #42731;
//! Twake Mail, tmail-flutter #2685). Gmail removes such images and Outlook for Windows
//! does not show them; a part referenced by `cid:` is what every reader shows. Report
//! only: the repair would move the image out of the HTML. One finding per HTML part.

use crate::engine::model::analysis::{Context, Finding};
use crate::engine::model::rules::Rule;
use crate::engine::syntax::ascii::clip;
use crate::engine::syntax::unreachable::is_data;

pub(super) fn check(cx: &mut Context) {
    let msg = cx.msg;
    let mut found = Vec::new();
    for part in &cx.html_parts {
        let mut images = part
            .outside
            .iter()
            .filter(|o| o.place.starts_with("img@") && is_data(&o.url));
        let Some(first) = images.next() else {
            continue;
        };
        let more = images.count();
        let others = match more {
            0 => " carries".to_string(),
            1 => " and one more carry".into(),
            n => format!(" and {n} more carry"),
        };
        found.push(Finding::new(
            Rule::RefDataUri,
            msg.path(&msg.entities[part.idx]),
            format!(
                "{} \"{}\"{others} the image in a data: URL: Gmail and Outlook for Windows show no image there (a part referenced by cid: is shown by every reader)",
                first.place,
                clip(&first.url),
            ),
        ));
    }
    for f in found {
        cx.report(f);
    }
}
