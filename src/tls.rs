//! TLS configuration: a certificate generated at start, and clients that trust exactly it.
//!
//! Owns: building rustls server and client configs (ring provider, TLS 1.3 preferred, ALPN).
//! Does not own: sockets or handshakes (the simulator and the transport do those).
//!
//! There is no global "insecure" switch: a client of the simulator trusts the one certificate
//! the simulator generated, and a client of a real endpoint trusts the webpki roots.

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A self-signed certificate for `localhost`, `127.0.0.1` and `::1`, generated at start.
#[derive(Clone)]
pub struct SelfSigned {
    /// The certificate, DER.
    pub cert_der: CertificateDer<'static>,
    /// The certificate, PEM (for `curl --cacert` and the Python SDK's `SSL_CERT_FILE`).
    pub cert_pem: String,
    key_der: Arc<Vec<u8>>,
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
        })
    }

    /// A server config presenting this certificate, offering ALPN `h2` and `http/1.1`.
    pub fn server_config(&self) -> anyhow::Result<Arc<rustls::ServerConfig>> {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.as_ref().clone()));
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![self.cert_der.clone()], key)?;
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
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(pem) {
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
