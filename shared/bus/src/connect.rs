//! Opening a connection to the broker: the URL parsed here, so that the frame size can be
//! asked for and a bad URL reported without echoing it (it carries the password).

use std::time::Duration;

use lapin::uri::AMQPUri;
use lapin::{Connection, ConnectionProperties};
use secrecy::{ExposeSecret, SecretString};

use crate::BusError;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Open a connection named `name`, asking for frames of at most `frame_max` bytes unless the
/// URL sets its own `frame_max`. The client keeps two ring buffers of 32 frames per
/// connection, so the frame size, not the traffic, sets most of an idle process's memory
/// (docs/performance.md, "Memory: the soak").
pub(crate) async fn open(
    url: &str,
    name: &str,
    frame_max: Option<u32>,
) -> Result<Connection, BusError> {
    let uri = with_frame_max(url, frame_max)?;
    let props = ConnectionProperties::default().with_connection_name(name.to_string().into());
    match tokio::time::timeout(CONNECT_TIMEOUT, Connection::connect_uri(uri, props)).await {
        Ok(res) => Ok(res?),
        Err(_) => Err(BusError::NotConnected),
    }
}

/// Check that the broker accepts a connection (for `hermes doctor`); declares nothing.
pub async fn probe(url: &SecretString) -> Result<(), BusError> {
    let conn = open(url.expose_secret(), "hermes-doctor", None).await?;
    let _ = conn.close(200, "probe".into()).await;
    Ok(())
}

/// `url` parsed, with `frame_max` asked for unless the URL asks for its own.
fn with_frame_max(url: &str, frame_max: Option<u32>) -> Result<AMQPUri, BusError> {
    let mut uri: AMQPUri = url.parse().map_err(|_| BusError::InvalidUrl)?;
    if uri.query.frame_max.is_none() {
        uri.query.frame_max = frame_max;
    }
    Ok(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_is_asked_for_unless_the_url_has_its_own() {
        let uri = with_frame_max("amqp://guest:guest@127.0.0.1:5672/%2f", Some(16_384)).unwrap();
        assert_eq!(uri.query.frame_max, Some(16_384));
        let own = with_frame_max("amqp://127.0.0.1/%2f?frame_max=4096", Some(16_384)).unwrap();
        assert_eq!(own.query.frame_max, Some(4096));
        let none = with_frame_max("amqp://127.0.0.1/%2f", None).unwrap();
        assert_eq!(none.query.frame_max, None);
    }

    #[test]
    fn a_bad_url_is_refused_without_echoing_its_password() {
        let err = with_frame_max("amqp://hermes:s3cret-pw@127.0.0.1:notaport/", Some(16_384))
            .unwrap_err();
        assert!(matches!(err, BusError::InvalidUrl), "{err:?}");
        assert!(!err.to_string().contains("s3cret-pw"), "{err}");
        assert!(!format!("{err:?}").contains("s3cret-pw"));
    }
}
