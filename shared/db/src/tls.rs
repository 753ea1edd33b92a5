//! TLS to PostgreSQL (`docs/deploy.md`, "TLS to PostgreSQL and Redis"): the `sslmode` and
//! `sslrootcert` parameters of `DATABASE_URL`, carried out with rustls.
//!
//! tokio-postgres knows only `disable`, `prefer` and `require` and leaves certificates to
//! the connector, so this module reads the parameters itself: `require` and `prefer`
//! encrypt without verifying (as libpq does), `verify-ca` checks the chain against the
//! roots, `verify-full` also checks that the certificate names the host. The roots are
//! `sslrootcert` (a PEM file), or the system's when it is absent or `system`. Without
//! `sslmode` the connection is plain (libpq would try TLS first).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode as PgSslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use tokio_rustls::TlsConnector;

/// What `DATABASE_URL` asks of TLS (libpq's `sslmode`, less `allow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plain (also when `sslmode` is absent).
    Disable,
    /// TLS when the server offers it, unverified; plain otherwise.
    Prefer,
    /// TLS or nothing, unverified.
    Require,
    /// TLS with a certificate chain that leads to a trusted root.
    VerifyCa,
    /// `VerifyCa`, and the certificate names the host connected to.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<Self, TlsError> {
        Ok(match value {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            other => {
                return Err(TlsError(format!(
                    "sslmode={other:?} is not one of disable, prefer, require, verify-ca, verify-full"
                )));
            }
        })
    }
}

/// A `DATABASE_URL` whose TLS parameters cannot be honoured.
#[derive(Debug, thiserror::Error)]
#[error("DATABASE_URL: {0}")]
pub struct TlsError(String);

/// The connector of every PostgreSQL connection a [`crate::Db`] makes (pool, `LISTEN`,
/// migrations). Cheap to clone.
#[derive(Clone)]
pub struct PgTls {
    /// `None`: plain (`sslmode` absent or `disable`).
    config: Option<Arc<ClientConfig>>,
}

/// Split `url` into the tokio-postgres configuration and the connector its `sslmode` and
/// `sslrootcert` ask for.
pub fn parse(url: &str) -> Result<(tokio_postgres::Config, PgTls), crate::DbError> {
    let mut parsed = url::Url::parse(url).map_err(|e| TlsError(format!("not a URL ({e})")))?;
    let (mut mode, mut root) = (SslMode::Disable, None);
    let mut kept = Vec::new();
    for (k, v) in parsed.query_pairs() {
        match &*k {
            "sslmode" => mode = SslMode::parse(&v)?,
            "sslrootcert" => root = Some(v.into_owned()),
            "sslcert" | "sslkey" => {
                return Err(TlsError(
                    "client certificates (sslcert, sslkey) are not supported; use a password"
                        .into(),
                )
                .into());
            }
            _ => kept.push((k.into_owned(), v.into_owned())),
        }
    }
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    let mut config =
        tokio_postgres::Config::from_str(parsed.as_str()).map_err(crate::DbError::Url)?;
    config.ssl_mode(match mode {
        SslMode::Disable => PgSslMode::Disable,
        SslMode::Prefer => PgSslMode::Prefer,
        _ => PgSslMode::Require,
    });
    let tls = PgTls::new(mode, root.as_deref())?;
    Ok((config, tls))
}

impl PgTls {
    /// The connector for `mode`, trusting `root` (a PEM file, `system`, or `None`: the system's).
    pub fn new(mode: SslMode, root: Option<&str>) -> Result<Self, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError(e.to_string()))?;
        let verifier: Arc<dyn ServerCertVerifier> = match mode {
            SslMode::Disable => return Ok(Self { config: None }),
            SslMode::Prefer | SslMode::Require => Arc::new(Unverified(provider)),
            SslMode::VerifyCa | SslMode::VerifyFull => {
                let roots = Arc::new(roots(root)?);
                let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                    .build()
                    .map_err(|e| TlsError(format!("sslrootcert: {e}")))?;
                if mode == SslMode::VerifyCa {
                    Arc::new(AnyName(webpki))
                } else {
                    webpki
                }
            }
        };
        let config = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(Self {
            config: Some(Arc::new(config)),
        })
    }
}

/// The trusted roots: the PEM file `root`, or the system's.
fn roots(root: Option<&str>) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    match root {
        Some(path) if path != "system" => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| TlsError(format!("sslrootcert={path}: {e}")))?;
            for cert in certs {
                let cert = cert.map_err(|e| TlsError(format!("sslrootcert={path}: {e}")))?;
                store
                    .add(cert)
                    .map_err(|e| TlsError(format!("sslrootcert={path}: {e}")))?;
            }
        }
        _ => {
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
        }
    }
    if store.is_empty() {
        return Err(TlsError("no trusted root certificate (sslrootcert)".into()));
    }
    Ok(store)
}

/// `require`/`prefer`: any certificate, but the handshake itself is still checked.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain must lead to a trusted root; the name is not checked.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

impl<S> MakeTlsConnect<S> for PgTls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = PgTlsStream<S>;
    type TlsConnect = PgTlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<PgTlsConnect> {
        let name = ServerName::try_from(domain.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(PgTlsConnect {
            config: self.config.clone(),
            name,
        })
    }
}

/// One connection's handshake.
pub struct PgTlsConnect {
    config: Option<Arc<ClientConfig>>,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for PgTlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = PgTlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<PgTlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            // tokio-postgres asks for TLS only when sslmode is prefer or require, which
            // this module sets only with a configuration.
            let config = self.config.ok_or_else(|| {
                io::Error::new(io::ErrorKind::Unsupported, "TLS is off (sslmode=disable)")
            })?;
            let tls = TlsConnector::from(config)
                .connect(self.name, stream)
                .await?;
            Ok(PgTlsStream(Box::new(tls)))
        })
    }
}

/// A TLS session to PostgreSQL.
pub struct PgTlsStream<S>(Box<tokio_rustls::client::TlsStream<S>>);

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for PgTlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        // SCRAM then authenticates without binding to this session (libpq's `prefer`).
        ChannelBinding::none()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for PgTlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for PgTlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_parameters_are_taken_out_of_the_url() {
        let (config, tls) =
            parse("postgres://u:p@db.example:5432/hermes?sslmode=require&application_name=x")
                .unwrap();
        assert_eq!(config.get_ssl_mode(), PgSslMode::Require);
        assert_eq!(config.get_application_name(), Some("x"));
        assert!(tls.config.is_some());
        let (config, tls) = parse("postgres://u:p@db.example/hermes").unwrap();
        assert_eq!(config.get_ssl_mode(), PgSslMode::Disable);
        assert!(tls.config.is_none());
    }

    #[test]
    fn bad_tls_parameters_are_refused_with_a_clear_error() {
        let bad = |url: &str| parse(url).err().expect("refused").to_string();
        assert!(bad("postgres://db/h?sslmode=verify-everything").contains("sslmode"));
        assert!(
            bad("postgres://db/h?sslmode=require&sslcert=/c.pem").contains("client certificates")
        );
        assert!(
            bad("postgres://db/h?sslmode=verify-full&sslrootcert=/nonexistent.pem")
                .contains("sslrootcert=/nonexistent.pem")
        );
    }
}
