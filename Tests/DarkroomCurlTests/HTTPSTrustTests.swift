import CCurl
import CCurlShim
import Darkroom
import DarkroomHTTPTestServer
import Foundation
import Testing

@testable import DarkroomCurl

/// HTTPS against a real TLS server on 127.0.0.1 whose certificate a test authority issued: the
/// authority is trusted only where `caFile` or `caPath` names it.
@Suite("HTTPS trust: caFile and caPath", .serialized)
struct HTTPSTrustTests {
  static let body = Array("fetched over TLS".utf8)
  let routes: [String: TestResponse] = ["/a": .ok(body: body)]

  @Test("caFile naming the test authority fetches over HTTPS, as HTTP/2 (ALPN h2)")
  func caFileTrustsTheAuthority() async throws {
    try await TLSFixtures.withServer(routes: routes) { tls, server in
      let options = try tls.optionsTrustingTestAuthority()
      #expect(options.trustedCertificates?.count == 1)
      let fetched = try await tls.fetch(server.url("/a"), options: options).get()
      #expect(fetched.bytes.data == Data(Self.body))
      #expect(server.requests.map(\.httpVersion) == ["HTTP/2"])
      // Another trust setting is another configuration (stage identifiers, cache keys).
      let digest = try #require(options.trustedCertificates?.digest)
      #expect(options.identifier.contains(",ca=\(digest)"))
      #expect(!tls.options(trusting: nil).identifier.contains(",ca="))
    }
  }

  @Test("trusted authorities replace a CA directory set before them (libcurl's built-in one, on Debian)")
  func caDirectorySetBeforeIsSwitchedOff() async throws {
    try await TLSFixtures.withServer(routes: routes) { tls, server in
      // A hashed directory holding the test authority, as OpenSSL looks certificates up in it.
      try tls.write(tls.authority.certificatePEM, to: "system/" + tls.authority.hashedName)
      let other = try TestCertificateAuthority(name: "Another CA")
      let otherAuthority = try TrustedCertificates(pem: Array(other.certificatePEM.utf8), origin: "other")
      func perform(trusting authorities: TrustedCertificates?) async throws -> CURLcode {
        let transfer = try #require(
          CurlTransfer(url: server.url("/a"), options: tls.options(trusting: nil), conditional: [:], progress: nil))
        // Stands for the directory libcurl was built with (a default, set before anything else).
        _ = dr_setopt_string(transfer.easy, CURLOPT_CAPATH, tls.path("system"))
        if let authorities { transfer.trust(authorities) }
        return await CurlTransferLoops.shared.perform(transfer).code
      }
      #expect(try await perform(trusting: nil) == CURLE_OK)  // the directory alone is trusted
      #expect(try await perform(trusting: otherAuthority) == CURLE_PEER_FAILED_VERIFICATION)
      #expect(server.requests.count == 1)
    }
  }

  @Test("HTTP/1.1 over TLS where the server offers only http/1.1")
  func http1OverTLS() async throws {
    try await TLSFixtures.withServer(routes: routes, protocols: ["http/1.1"]) { tls, server in
      let fetched = try await tls.fetch(server.url("/a"), options: tls.optionsTrustingTestAuthority()).get()
      #expect(fetched.bytes.data == Data(Self.body))
      #expect(server.requests.map(\.httpVersion) == ["HTTP/1.1"])
    }
  }

  @Test("without caFile the test authority is unknown: refused, saying the certificate was not trusted")
  func systemStoreRefusesTheTestAuthority() async throws {
    try await TLSFixtures.withServer(routes: routes) { tls, server in
      let error = try #require(await tls.fetch(server.url("/a"), options: tls.options(trusting: nil)).failure)
      #expect(error.code == .fetchFailed)
      #expect(error.message.contains("certificate for \(server.url("/a")) was not trusted"))
      #expect(error.message.contains("system's certificate authorities"))
      #expect(error.message.contains("caFile or caPath"))
      #expect(server.requests.isEmpty)
    }
  }

  @Test("a caFile of another authority is refused, naming that file")
  func anotherAuthorityIsRefused() async throws {
    try await TLSFixtures.withServer(routes: routes) { tls, server in
      let other = try TestCertificateAuthority(name: "Another CA")
      let otherFile = try tls.write(other.certificatePEM, to: "other.pem")
      let options = tls.options(trusting: try TrustedCertificates.file(otherFile, roots: []))
      let error = try #require(await tls.fetch(server.url("/a"), options: options).failure)
      #expect(error.message.contains("was not trusted"))
      #expect(error.message.contains("caFile \(otherFile)"))
      #expect(server.requests.isEmpty)
    }
  }

  @Test("a certificate issued for another host name is refused")
  func certificateForAnotherName() async throws {
    let tls = try TLSFixtures()
    defer { tls.remove() }
    let identity = try tls.authority.issueServerIdentity(hosts: ["images.example"])
    let server = try await TestHTTPServer.start(routes: routes, tls: TestTLSOptions(identity: identity))
    defer { Task { try? await server.shutdown() } }
    let error = try #require(await tls.fetch(server.url("/a"), options: tls.optionsTrustingTestAuthority()).failure)
    #expect(error.message.contains("was not trusted: it is issued for another host name"))
    #expect(server.requests.isEmpty)
  }

  @Test("a connection or TLS session made under one trust setting is not reused under another")
  func trustSettingsDoNotShareConnections() async throws {
    try await TLSFixtures.withServer(routes: routes) { tls, server in
      let trusted = try tls.optionsTrustingTestAuthority()
      let other = try TestCertificateAuthority(name: "Another CA")
      let untrusted = tls.options(trusting: try TrustedCertificates(pem: Array(other.certificatePEM.utf8), origin: "other"))
      #expect(await tls.fetch(server.url("/a"), options: trusted).failure == nil)
      // The first connection is idle in libcurl's cache now; these must not ride on it.
      #expect(await tls.fetch(server.url("/a"), options: untrusted).failure?.message.contains("was not trusted") == true)
      #expect(await tls.fetch(server.url("/a"), options: tls.options(trusting: nil)).failure != nil)
      #expect(await tls.fetch(server.url("/a"), options: trusted).failure == nil)
      #expect(server.requests.count == 2)
      #expect(server.connectionCount == 3)
    }
  }

  @Test("caPath: every certificate named like OpenSSL's hashed names is trusted, other names are not read")
  func caPathHashedDirectory() async throws {
    try await TLSFixtures.withServer(routes: routes) { tls, server in
      let directory = tls.path("hashed")
      try tls.write("not a certificate: never read", to: "hashed/readme.pem")
      // The usual shape: `<subject hash>.0` links to the PEM file (as `openssl rehash` makes it).
      try FileManager.default.createSymbolicLink(
        atPath: directory + "/" + tls.authority.hashedName, withDestinationPath: "../ca.pem")
      let other = try TestCertificateAuthority(name: "Another CA")
      try tls.write(other.certificatePEM, to: "hashed/0c4e9a77.0")
      let authorities = try TrustedCertificates.directory(directory, roots: [tls.folder.path])
      #expect(authorities.count == 2)
      let fetched = try await tls.fetch(server.url("/a"), options: tls.options(trusting: authorities)).get()
      #expect(fetched.bytes.data == Data(Self.body))

      try tls.write(other.certificatePEM, to: "other-only/0c4e9a77.0")
      let refused = tls.options(trusting: try TrustedCertificates.directory(tls.path("other-only"), roots: []))
      #expect(await tls.fetch(server.url("/a"), options: refused).failure?.message.contains("was not trusted") == true)
    }
  }
}

extension Result {
  /// The error of a failure, `nil` for a success.
  var failure: Failure? {
    if case .failure(let error) = self { return error }
    return nil
  }
}
