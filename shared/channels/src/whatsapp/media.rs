//! Where WhatsApp keeps a file
//! (<https://developers.facebook.com/docs/whatsapp/cloud-api/reference/media#download-media>):
//!
//! - Cloud API: `GET {base}/<media id>` with the Bearer access token gives a JSON `url`,
//!   downloaded with the same token.
//! - 360dialog: `GET {base}/<media id>` with `D360-API-KEY` gives Meta's `url`; 360dialog
//!   serves it under its own host, so its path and query are requested from `{base}` with the
//!   same key (<https://docs.360dialog.com/docs/waba-messaging/media>).

use hermes_config::WhatsappSender;
use hermes_net::http::describe;
use serde::Deserialize;
use url::Url;

use super::auth::Auth;
use crate::media::{LocateError, Located, Lookup};

const PLATFORM: &str = "whatsapp";

/// Meta's media API answer (Cloud API and 360dialog alike).
#[derive(Deserialize)]
struct MetaMedia {
    url: String,
    #[serde(default)]
    file_size: Option<u64>,
}

/// Where the file `media_id` of the number `sender` is, asked through `lookup`.
pub(crate) async fn locate<L: Lookup>(
    sender: &WhatsappSender,
    media_id: &str,
    lookup: &L,
) -> Result<Located, L::Error> {
    let no_credentials = || LocateError::NoCredentials { platform: PLATFORM };
    let (WhatsappSender::Cloud { base_url: base, .. }
    | WhatsappSender::Dialog360 { base_url: base, .. }) = sender;
    let auth = Auth::of(sender).header().ok_or_else(no_credentials)?;
    let mut url = base.clone();
    // The id is one path segment, escaped: it cannot reach another path of the API.
    url.path_segments_mut()
        .map_err(|()| no_credentials())?
        .pop_if_empty()
        .push(media_id);
    let resp = lookup.get(PLATFORM, url, Some(auth.clone())).await?;
    LocateError::check_status(PLATFORM, "the media API", resp.status())?;
    let media: MetaMedia = resp.json().await.map_err(|e| LocateError::Refused {
        platform: PLATFORM,
        why: format!("the media API's answer has no URL: {}", describe(e)),
    })?;
    let mut url = Url::parse(&media.url).map_err(|e| LocateError::Refused {
        platform: PLATFORM,
        why: format!("the media URL is not valid: {e}"),
    })?;
    if let WhatsappSender::Dialog360 { .. } = sender {
        // 360dialog proxies Meta's media host: same path and query, its own host.
        let mut proxied = base.clone();
        proxied.set_path(url.path());
        proxied.set_query(url.query());
        url = proxied;
    }
    Ok(Located {
        url,
        auth: Some(auth),
        size: media.file_size,
    })
}
