import Darkroom
import DarkroomHTTPTestServer
import Foundation

/// A test certificate authority, a server identity it issued for 127.0.0.1 and localhost, and a
/// temporary folder holding the authority's certificate as PEM (`ca.pem`).
struct TLSFixtures {
  let authority: TestCertificateAuthority
  let identity: TestServerIdentity
  let folder: URL

  init() throws {
    authority = try TestCertificateAuthority(name: "Darkroom Test CA")
    identity = try authority.issueServerIdentity(hosts: ["localhost"], addresses: [[127, 0, 0, 1]])
    folder = FileManager.default.temporaryDirectory.appendingPathComponent("darkroom-tls-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    try write(authority.certificatePEM, to: "ca.pem")
  }

  /// The path of `name` in the folder.
  func path(_ name: String) -> String { folder.appendingPathComponent(name).path }

  /// Writes `text` to `name` in the folder (folders on the way are made) and returns its path.
  @discardableResult
  func write(_ text: String, to name: String) throws -> String {
    try write(Array(text.utf8), to: name)
  }

  @discardableResult
  func write(_ bytes: [UInt8], to name: String) throws -> String {
    let url = folder.appendingPathComponent(name)
    try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    try Data(bytes).write(to: url)
    return url.path
  }

  func remove() { try? FileManager.default.removeItem(at: folder) }

  /// A TLS server with this identity, offering `protocols` by ALPN.
  func server(routes: [String: TestResponse], protocols: [String] = ["h2", "http/1.1"]) async throws -> TestHTTPServer {
    try await TestHTTPServer.start(routes: routes, tls: TestTLSOptions(identity: identity, applicationProtocols: protocols))
  }

  /// Runs `body` with new fixtures and a TLS server of theirs serving `routes` (ALPN `protocols`),
  /// then shuts the server down and removes the folder.
  static func withServer(
    routes: [String: TestResponse], protocols: [String] = ["h2", "http/1.1"],
    _ body: (TLSFixtures, TestHTTPServer) async throws -> Void
  ) async throws {
    let tls = try TLSFixtures()
    defer { tls.remove() }
    let server = try await tls.server(routes: routes, protocols: protocols)
    do {
      try await body(tls, server)
    } catch {
      try? await server.shutdown()
      throw error
    }
    try await server.shutdown()
  }

  /// Fetch options for the loopback server, trusting the test authority (`ca.pem`) alone.
  func optionsTrustingTestAuthority() throws -> HTTPOptions {
    options(trusting: try TrustedCertificates.file(path("ca.pem"), roots: []))
  }

  /// Fetch options for the loopback server, trusting `authorities`.
  func options(trusting authorities: TrustedCertificates?) -> HTTPOptions {
    var options = HTTPOptions()
    options.allowHosts = ["127.0.0.1", "localhost"]
    options.retries = 0
    options.trustedCertificates = authorities
    return options
  }

  /// Fetches `url` with `options`; the error when it fails.
  func fetch(_ url: String, options: HTTPOptions) async -> Result<FetchedData, PipelineError> {
    do {
      return .success(try await HTTPTransport(options: options).fetch(ImageSource(url)))
    } catch let error as PipelineError {
      return .failure(error)
    } catch {
      return .failure(PipelineError(.stageFailed, "\(error)"))
    }
  }
}
