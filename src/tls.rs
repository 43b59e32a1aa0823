//! TLS configuration: a certificate generated at start, and clients that trust exactly it.
//!
//! Owns: building rustls server and client configs (ring provider, TLS 1.3 preferred, ALPN).
//! Does not own: sockets or handshakes (the simulator and the transport do those).
//!
//! There is no global "insecure" switch: a client of the simulator trusts the one certificate
//! the simulator generated, and a client of a real endpoint trusts the system's store, the
//! bundled webpki roots and the target's `ca_file` ([`EndpointTrust`]), and may present a
//! client certificate (mutual TLS).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A server identity: a self-signed certificate for `localhost`, `127.0.0.1` and `::1`
/// generated at start, or a given chain and key ([`SelfSigned::from_pem`]); optionally
/// requiring client certificates ([`SelfSigned::require_client_certs`]).
#[derive(Clone)]
pub struct SelfSigned {
    /// The (leaf) certificate, DER.
    pub cert_der: CertificateDer<'static>,
    /// The certificate (chain), PEM (for `curl --cacert` and the Python SDK's `SSL_CERT_FILE`).
    pub cert_pem: String,
    key_der: Arc<Vec<u8>>,
    /// The whole chain presented (leaf first); empty means just `cert_der`.
    chain: Vec<CertificateDer<'static>>,
    /// When set, clients must present a certificate issued by one of these.
    client_roots: Option<Arc<rustls::RootCertStore>>,
}

impl std::fmt::Debug for SelfSigned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelfSigned").finish_non_exhaustive()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl SelfSigned {
    /// Generates a fresh key pair and certificate.
    pub fn generate() -> anyhow::Result<Self> {
        let names = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
        ];
        let certified = rcgen::generate_simple_self_signed(names)?;
        Ok(SelfSigned {
            cert_der: certified.cert.der().clone(),
            cert_pem: certified.cert.pem(),
            key_der: Arc::new(certified.signing_key.serialize_der()),
            chain: Vec::new(),
            client_roots: None,
        })
    }

    /// A given certificate chain (PEM, leaf first) and its PKCS#8 private key (PEM), e.g. a
    /// leaf signed by a private CA. [`Self::client_config`] trusts the leaf alone, which
    /// verifies only for a self-signed one: clients of a CA-signed leaf trust the CA.
    pub fn from_pem(chain_pem: &str, key_pem: &str) -> anyhow::Result<Self> {
        let chain = read_certs(chain_pem.as_bytes())?;
        anyhow::ensure!(!chain.is_empty(), "no certificate in the chain PEM");
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| anyhow::anyhow!("no private key in the key PEM: {e}"))?;
        let PrivateKeyDer::Pkcs8(key) = key else {
            anyhow::bail!("the key PEM must hold a PKCS#8 key (BEGIN PRIVATE KEY)");
        };
        Ok(SelfSigned {
            cert_der: chain[0].clone(),
            cert_pem: chain_pem.to_string(),
            key_der: Arc::new(key.secret_pkcs8_der().to_vec()),
            chain,
            client_roots: None,
        })
    }

    /// Requires every client to present a certificate issued by a CA in `ca_pem`.
    pub fn require_client_certs(mut self, ca_pem: &str) -> anyhow::Result<Self> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in read_certs(ca_pem.as_bytes())? {
            roots.add(cert)?;
        }
        anyhow::ensure!(!roots.is_empty(), "no CA certificate in the PEM data");
        self.client_roots = Some(Arc::new(roots));
        Ok(self)
    }

    /// A server config presenting this certificate, offering ALPN `h2` and `http/1.1`.
    pub fn server_config(&self) -> anyhow::Result<Arc<rustls::ServerConfig>> {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.as_ref().clone()));
        let chain = if self.chain.is_empty() {
            vec![self.cert_der.clone()]
        } else {
            self.chain.clone()
        };
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?;
        let builder = match &self.client_roots {
            None => builder.with_no_client_auth(),
            Some(roots) => builder.with_client_cert_verifier(
                rustls::server::WebPkiClientVerifier::builder_with_provider(
                    roots.clone(),
                    provider(),
                )
                .build()?,
            ),
        };
        let mut cfg = builder.with_single_cert(chain, key)?;
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }

    /// A client config that trusts exactly this certificate.
    pub fn client_config(&self, alpn: &[&[u8]]) -> anyhow::Result<Arc<rustls::ClientConfig>> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert_der.clone())?;
        client_config_with_roots(roots, alpn)
    }
}

/// A client config that trusts the public webpki roots (for real endpoints).
pub fn public_client_config(alpn: &[&[u8]]) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    client_config_with_roots(roots, alpn)
}

/// A client config trusting the certificates in a PEM file (`--cacert`).
pub fn client_config_from_pem(
    pem: &[u8],
    alpn: &[&[u8]],
) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert: CertificateDer<'static> = cert?;
        roots.add(cert)?;
    }
    anyhow::ensure!(!roots.is_empty(), "no certificate found in the PEM data");
    client_config_with_roots(roots, alpn)
}

fn client_config_with_roots(
    roots: rustls::RootCertStore,
    alpn: &[&[u8]],
) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(cfg))
}

fn read_certs(pem: &[u8]) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let mut out = Vec::new();
    for cert in CertificateDer::pem_slice_iter(pem) {
        out.push(cert.map_err(|e| anyhow::anyhow!("unreadable PEM: {e}"))?);
    }
    Ok(out)
}

/// The system's certificate store, read once per process (`SSL_CERT_FILE` and
/// `SSL_CERT_DIR` are honoured), with a note for each part that could not be read.
fn system_store() -> &'static (Vec<CertificateDer<'static>>, Vec<String>) {
    static STORE: std::sync::OnceLock<(Vec<CertificateDer<'static>>, Vec<String>)> =
        std::sync::OnceLock::new();
    STORE.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        let notes = found.errors.iter().map(|e| e.to_string()).collect();
        (found.certs, notes)
    })
}

/// One certificate file a target named: which key named it and where it is.
#[derive(Debug, Clone, Copy)]
pub struct NamedFile<'a> {
    /// The target key (`ca_file`, `client_cert`, `client_key`).
    pub key: &'static str,
    /// The file.
    pub path: &'a Path,
}

impl NamedFile<'_> {
    fn read(&self) -> anyhow::Result<Vec<u8>> {
        std::fs::read(self.path).map_err(|e| {
            anyhow::anyhow!(
                "{} {}: cannot read it ({e}); relative paths are taken from the folder of the file that names them",
                self.key,
                self.path.display()
            )
        })
    }

    fn fail(&self, why: impl std::fmt::Display) -> anyhow::Error {
        anyhow::anyhow!("{} {}: {why}", self.key, self.path.display())
    }
}

/// What a client of a real endpoint trusts and presents: the system's store, the bundled
/// webpki roots, the certificates of a `ca_file`, and optionally a client certificate.
/// Built (files read and checked) before any request; holds the client key in memory only.
pub struct EndpointTrust {
    roots: rustls::RootCertStore,
    client: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    description: String,
    notes: Vec<String>,
}

impl std::fmt::Debug for EndpointTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointTrust")
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl EndpointTrust {
    /// Reads and checks the files. Errors name the key and the file (never key material).
    pub fn load(
        ca_file: Option<NamedFile<'_>>,
        client: Option<(NamedFile<'_>, NamedFile<'_>)>,
    ) -> anyhow::Result<Self> {
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let (system, system_notes) = system_store();
        let (added, _ignored) = roots.add_parsable_certificates(system.iter().cloned());
        let mut parts = vec![
            format!("system store ({added} certificates)"),
            "bundled webpki roots".to_string(),
        ];
        let notes = system_notes
            .iter()
            .map(|n| format!("system certificate store: {n}"))
            .collect();
        if let Some(f) = ca_file {
            let pem = f.read()?;
            let certs = read_certs(&pem).map_err(|e| f.fail(e))?;
            if certs.is_empty() {
                return Err(
                    f.fail("no certificate found; expected PEM (-----BEGIN CERTIFICATE-----)")
                );
            }
            let n = certs.len();
            for c in certs {
                roots
                    .add(c)
                    .map_err(|e| f.fail(format!("not a usable CA certificate: {e}")))?;
            }
            parts.push(format!("ca_file {} ({n} certificates)", f.path.display()));
        }
        let client = match client {
            None => None,
            Some((cert_file, key_file)) => {
                let pem = cert_file.read()?;
                let chain = read_certs(&pem).map_err(|e| cert_file.fail(e))?;
                if chain.is_empty() {
                    return Err(cert_file
                        .fail("no certificate found; expected PEM (-----BEGIN CERTIFICATE-----)"));
                }
                let pem = key_file.read()?;
                let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
                    key_file.fail(format!(
                        "no private key found ({e}); expected PEM (-----BEGIN PRIVATE KEY-----, RSA or EC)"
                    ))
                })?;
                // Checks that the key is usable and belongs to the certificate.
                rustls::sign::CertifiedKey::from_der(chain.clone(), key.clone_key(), &provider())
                    .map_err(|e| {
                    key_file.fail(format!(
                        "does not fit client_cert {}: {e}",
                        cert_file.path.display()
                    ))
                })?;
                parts.push(format!("client certificate {}", cert_file.path.display()));
                Some((chain, key))
            }
        };
        Ok(EndpointTrust {
            roots,
            client,
            description: parts.join(" + "),
            notes,
        })
    }

    /// What is trusted and presented, for messages and the manifest (no key material).
    pub fn describe(&self) -> &str {
        &self.description
    }

    /// Parts of the system store that could not be read (the rest is used).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// A rustls client config offering `alpn`.
    pub fn client_config(&self, alpn: &[&[u8]]) -> anyhow::Result<Arc<rustls::ClientConfig>> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(self.roots.clone());
        let mut cfg = match &self.client {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => builder.with_client_auth_cert(chain.clone(), key.clone_key())?,
        };
        cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(cfg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn client_trusting_the_generated_cert_completes_a_tls13_handshake() {
        let cert = SelfSigned::generate().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(cert.server_config().unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.unwrap();
            tls.write_all(b"hi").await.unwrap();
            tls.shutdown().await.unwrap();
        });
        let connector = tokio_rustls::TlsConnector::from(cert.client_config(&[b"h2"]).unwrap());
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut tls = connector.connect(name, tcp).await.unwrap();
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        assert_eq!(
            tls.get_ref().1.protocol_version(),
            Some(rustls::ProtocolVersion::TLSv1_3)
        );
        let mut got = Vec::new();
        tls.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"hi");
        server.await.unwrap();

        // A client with only the public roots must refuse the self-signed certificate.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(cert.server_config().unwrap());
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let _ = acceptor.accept(tcp).await;
        });
        let connector = tokio_rustls::TlsConnector::from(public_client_config(&[]).unwrap());
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        assert!(connector.connect(name, tcp).await.is_err());
    }
}
