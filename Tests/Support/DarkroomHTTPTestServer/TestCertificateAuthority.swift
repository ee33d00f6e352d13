import Crypto
import Foundation
import X509

/// A certificate authority made in the test process (a P-256 key, a self-signed CA certificate),
/// for TLS tests without the `openssl` tool or keys kept in the repository.
///
/// ```swift
/// let authority = try TestCertificateAuthority(name: "Darkroom Test CA")
/// let identity = try authority.issueServerIdentity(hosts: ["localhost"], addresses: [[127, 0, 0, 1]])
/// let server = try await TestHTTPServer.start(routes: routes, tls: TestTLSOptions(identity: identity))
/// try authority.certificatePEM.write(toFile: "/tmp/x/ca.pem", atomically: true, encoding: .utf8)
/// ```
public struct TestCertificateAuthority: Sendable {
  /// The authority's private key (raw bytes: the key type is not Sendable).
  private let keyBytes: Data
  private let name: DistinguishedName
  /// The CA certificate, PEM.
  public let certificatePEM: String

  /// Makes a new authority, valid from an hour ago for a day.
  public init(name commonName: String) throws {
    let key = P256.Signing.PrivateKey()
    keyBytes = key.rawRepresentation
    name = try DistinguishedName {
      CommonName(commonName)
      OrganizationName("Darkroom tests")
    }
    let extensions = try Certificate.Extensions {
      Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
      Critical(KeyUsage(keyCertSign: true, cRLSign: true))
      SubjectKeyIdentifier(hash: Certificate.PublicKey(key.publicKey))
    }
    let certificate = try Certificate(
      version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: Certificate.PublicKey(key.publicKey),
      notValidBefore: Date() - 3600, notValidAfter: Date() + 86_400, issuer: name, subject: name,
      signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions, issuerPrivateKey: Certificate.PrivateKey(key))
    certificatePEM = try certificate.serializeAsPEM().pemString + "\n"
  }

  /// Issues a server certificate for the host names and IP addresses (4 or 16 bytes each).
  public func issueServerIdentity(hosts: [String], addresses: [[UInt8]] = []) throws -> TestServerIdentity {
    let key = try P256.Signing.PrivateKey(rawRepresentation: keyBytes)
    let serverKey = P256.Signing.PrivateKey()
    let subject = try DistinguishedName { CommonName(hosts.first ?? "server") }
    let names = hosts.map { GeneralName.dnsName($0) } + addresses.map { GeneralName.ipAddress(.init(contentBytes: $0[...])) }
    let extensions = try Certificate.Extensions {
      Critical(BasicConstraints.notCertificateAuthority)
      Critical(KeyUsage(digitalSignature: true))
      try ExtendedKeyUsage([.serverAuth])
      SubjectAlternativeNames(names)
      AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: Certificate.PublicKey(key.publicKey)).keyIdentifier)
    }
    let certificate = try Certificate(
      version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: Certificate.PublicKey(serverKey.publicKey),
      notValidBefore: Date() - 3600, notValidAfter: Date() + 86_400, issuer: name, subject: subject,
      signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions, issuerPrivateKey: Certificate.PrivateKey(key))
    return TestServerIdentity(
      certificatePEM: try certificate.serializeAsPEM().pemString + "\n", privateKeyPEM: serverKey.pemRepresentation + "\n")
  }
}

/// A server's certificate and private key, PEM.
public struct TestServerIdentity: Sendable {
  public var certificatePEM: String
  public var privateKeyPEM: String
}
