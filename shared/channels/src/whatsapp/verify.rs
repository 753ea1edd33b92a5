//! 360dialog's webhook token. 360dialog relays the Cloud API's payload without Meta's
//! signature (<https://docs.360dialog.com/docs/waba-messaging/webhook>), so the webhook URL
//! we give it carries a token of ours (`D360_WEBHOOK_TOKEN`): in a header it adds
//! (`D360_WEBHOOK_TOKEN_HEADER`) or, for setups that cannot add one, in the path. Either is
//! checked, in constant time, before the body is read.

use http::HeaderMap;
use secrecy::SecretString;

use crate::inbound::Refusal;
use crate::token::{check_token, header};

/// Whether the request carries `expected`, in its path or else in header `header_name`;
/// off without a token configured.
pub fn check_d360(
    expected: Option<&SecretString>,
    header_name: &str,
    headers: &HeaderMap,
    path_token: Option<&str>,
) -> Result<(), Refusal> {
    let given = path_token.or_else(|| header(headers, header_name));
    check_token(expected, given)
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn the_token_is_read_from_the_path_or_else_the_header() {
        let token = SecretString::from("tok");
        let check = |headers: &HeaderMap, path| check_d360(Some(&token), "x-t", headers, path);
        let mut headers = HeaderMap::new();
        assert_eq!(check(&headers, None), Err(Refusal::BadSignature));
        assert_eq!(check(&headers, Some("tok")), Ok(()));
        headers.insert("x-t", HeaderValue::from_static("tok"));
        assert_eq!(check(&headers, None), Ok(()));
        // A path token, when there is one, is the one checked.
        assert_eq!(check(&headers, Some("nope")), Err(Refusal::BadSignature));
        assert_eq!(check_d360(None, "x-t", &headers, None), Err(Refusal::Off));
    }
}
