//! TLS for `serve`: a certificate chain and its private key from PEM files, with rustls.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// The PEM files of `--cert-file` and `--key-file`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert_file: PathBuf,
    /// The private key (PKCS #8, PKCS #1 or SEC1).
    pub key_file: PathBuf,
}

/// Why TLS cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file cannot be read or holds nothing usable.
    #[error("{}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the pair (e.g. the key does not match the certificate).
    #[error("{}, {}: {source}", cert_file.display(), key_file.display())]
    Config {
        /// The certificate file.
        cert_file: PathBuf,
        /// The key file.
        key_file: PathBuf,
        /// What rustls said.
        #[source]
        source: tokio_rustls::rustls::Error,
    },
}

fn file_error(path: &Path, reason: impl ToString) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

impl TlsFiles {
    /// An acceptor serving the certificate with its key, over HTTP/1.1.
    ///
    /// # Errors
    ///
    /// [`TlsError`] when a file cannot be read or parsed, or the pair is refused.
    pub fn acceptor(&self) -> Result<TlsAcceptor, TlsError> {
        let certificates = CertificateDer::pem_file_iter(&self.cert_file)
            .map_err(|e| file_error(&self.cert_file, e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| file_error(&self.cert_file, e))?;
        if certificates.is_empty() {
            return Err(file_error(&self.cert_file, "no certificate in it"));
        }
        let key = PrivateKeyDer::from_pem_file(&self.key_file)
            .map_err(|e| file_error(&self.key_file, e))?;
        let config_error = |source| TlsError::Config {
            cert_file: self.cert_file.clone(),
            key_file: self.key_file.clone(),
            source,
        };
        let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(config_error)?
            .with_no_client_auth()
            .with_single_cert(certificates, key)
            .map_err(config_error)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}
