//! An in-process TLS terminator in front of the shared PostgreSQL and Redis, so tests can
//! reach them over TLS with a certificate they made, without reconfiguring the servers other
//! tests share. For PostgreSQL it answers the client's `SSLRequest` with `S`, does the
//! handshake and forwards the plain protocol; for Redis it terminates TLS and pipes.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// The protocol the terminator speaks to its client before TLS starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// PostgreSQL: TLS begins after an `SSLRequest` answered with `S`.
    Postgres,
    /// Redis (`rediss://`): TLS from the first byte.
    Redis,
}

/// `SSLRequest`: length 8, then the code 1234 5679 (PostgreSQL protocol, "SSL Session Encryption").
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// A throwaway certificate authority, its certificate written to a PEM file (removed on drop).
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// The CA certificate as PEM, for `sslrootcert=`.
    pub file: PathBuf,
}

impl TestCa {
    pub fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "hermes test CA");
        let key = KeyPair::generate().expect("CA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("CA certificate");
        let file = std::env::temp_dir().join(format!(
            "hermes-test-ca-{}.pem",
            uuid::Uuid::now_v7().simple()
        ));
        std::fs::write(&file, issuer.pem()).expect("CA file written");
        Self { issuer, file }
    }

    /// A server certificate for `names` (DNS names or IP addresses) signed by this CA.
    fn leaf(&self, names: &[&str]) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let params = CertificateParams::new(names).expect("server certificate parameters");
        let key = KeyPair::generate().expect("server key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("server certificate");
        let chain = vec![cert.der().clone(), self.issuer.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        (chain, key)
    }

    /// The CA file's path.
    pub fn path(&self) -> &Path {
        &self.file
    }
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

/// A TLS terminator listening on a free local port; stops on drop.
pub struct TlsTerminator {
    pub addr: SocketAddr,
    sessions: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl TlsTerminator {
    /// Terminate TLS for `protocol` with a certificate for `names` signed by `ca`, and
    /// forward each session in plain to `target`.
    pub async fn start(
        protocol: Protocol,
        target: SocketAddr,
        ca: &TestCa,
        names: &[&str],
    ) -> Self {
        hermes_net::install_crypto_provider();
        let (chain, key) = ca.leaf(names);
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("server TLS configuration");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let sessions = Arc::new(AtomicUsize::new(0));
        let counted = sessions.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let counted = counted.clone();
                tokio::spawn(async move {
                    let _ = terminate(protocol, client, acceptor, target, counted).await;
                });
            }
        });
        Self {
            addr,
            sessions,
            task,
        }
    }

    /// TLS sessions established so far (a client that refused the certificate makes none).
    pub fn sessions(&self) -> usize {
        self.sessions.load(Ordering::Relaxed)
    }
}

impl Drop for TlsTerminator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn terminate(
    protocol: Protocol,
    mut client: TcpStream,
    acceptor: TlsAcceptor,
    target: SocketAddr,
    sessions: Arc<AtomicUsize>,
) -> std::io::Result<()> {
    if protocol == Protocol::Postgres {
        let mut request = [0u8; 8];
        client.read_exact(&mut request).await?;
        if request != SSL_REQUEST {
            // A client speaking plain to a TLS-only server: refuse, as `hostssl` would.
            return Ok(());
        }
        client.write_all(b"S").await?;
    }
    let mut tls = acceptor.accept(client).await?;
    sessions.fetch_add(1, Ordering::Relaxed);
    let mut server = TcpStream::connect(target).await?;
    tokio::io::copy_bidirectional(&mut tls, &mut server).await?;
    Ok(())
}
