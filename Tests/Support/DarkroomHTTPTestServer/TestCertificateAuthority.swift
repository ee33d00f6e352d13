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
  /// The name a hashed directory gives the certificate (`openssl rehash`): OpenSSL's subject
  /// hash and `.0`, e.g. `"5d2f6a1b.0"`.
  public let hashedName: String
  private static let organization = "Darkroom tests"

  /// Makes a new authority, valid from an hour ago for a day.
  public init(name commonName: String) throws {
    let key = P256.Signing.PrivateKey()
    keyBytes = key.rawRepresentation
    name = try DistinguishedName {
      CommonName(commonName)
      OrganizationName(Self.organization)
    }
    hashedName = Self.subjectHash(commonName: commonName, organization: Self.organization) + ".0"
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

extension TestCertificateAuthority {
  /// OpenSSL's subject hash (`X509_NAME_hash_ex`) of the name `CN=commonName, O=organization`: the
  /// first 4 bytes of the SHA-1 of the name's canonical encoding, read little-endian, in hex. The
  /// canonical encoding is the DER of each relative name (a SET of one attribute), without the outer
  /// SEQUENCE, with every value a UTF8String in lower case with spaces trimmed and collapsed.
  static func subjectHash(commonName: String, organization: String) -> String {
    func canonical(_ value: String) -> [UInt8] {
      Array(value.lowercased().split(separator: " ").joined(separator: " ").utf8)
    }
    func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
      // Short and one-byte long forms cover the names these tests make (under 256 bytes).
      content.count < 0x80 ? [tag, UInt8(content.count)] + content : [tag, 0x81, UInt8(content.count & 0xff)] + content
    }
    func relativeName(_ oid: [UInt8], _ value: String) -> [UInt8] {
      tlv(0x31, tlv(0x30, tlv(0x06, oid) + tlv(0x0c, canonical(value))))
    }
    let encoded = relativeName([0x55, 0x04, 0x03], commonName) + relativeName([0x55, 0x04, 0x0a], organization)
    let digest = Array(Insecure.SHA1.hash(data: encoded))
    let value = UInt32(digest[0]) | UInt32(digest[1]) << 8 | UInt32(digest[2]) << 16 | UInt32(digest[3]) << 24
    let hex = String(value, radix: 16)
    return String(repeating: "0", count: 8 - hex.count) + hex
  }
}
