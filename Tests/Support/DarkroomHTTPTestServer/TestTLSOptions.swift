import NIOCore
import NIOHTTP2
import NIOSSL

/// TLS for a ``TestHTTPServer``: its certificate and key, and the protocols it offers by ALPN.
///
/// With `h2` offered (the default), a client that asks for it speaks HTTP/2 (one connection,
/// many streams); ``RecordedRequest/httpVersion`` tells which protocol each request came over.
///
/// ```swift
/// let identity = try authority.issueServerIdentity(hosts: ["localhost"], addresses: [[127, 0, 0, 1]])
/// let server = try await TestHTTPServer.start(routes: routes, tls: TestTLSOptions(identity: identity))
/// server.url("/a.jpg")   // "https://127.0.0.1:PORT/a.jpg"
/// ```
public struct TestTLSOptions: Sendable {
  public var identity: TestServerIdentity
  /// The ALPN protocols offered, in order of preference.
  public var applicationProtocols: [String]

  public init(identity: TestServerIdentity, applicationProtocols: [String] = ["h2", "http/1.1"]) {
    self.identity = identity
    self.applicationProtocols = applicationProtocols
  }

  func makeContext() throws -> NIOSSLContext {
    let certificate = try NIOSSLCertificate(bytes: Array(identity.certificatePEM.utf8), format: .pem)
    let key = try NIOSSLPrivateKey(bytes: Array(identity.privateKeyPEM.utf8), format: .pem)
    var configuration = TLSConfiguration.makeServerConfiguration(
      certificateChain: [.certificate(certificate)], privateKey: .privateKey(key))
    configuration.applicationProtocols = applicationProtocols
    // Closing does not wait for the client's close_notify (5 s by default): a client that keeps
    // its connection idle would hold up every shutdown.
    configuration.shutdownTimeout = .milliseconds(50)
    return try NIOSSLContext(configuration: configuration)
  }
}

extension Channel {
  /// TLS, then HTTP/2 or HTTP/1.1 as ALPN decides, each request (HTTP/2: each stream) answered by
  /// a ``TestHTTPConnectionHandler``.
  func configureTestTLSPipeline(context: NIOSSLContext, registry: RequestRegistry, connection: Int) -> EventLoopFuture<Void> {
    do {
      try pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
    } catch {
      return eventLoop.makeFailedFuture(error)
    }
    return configureCommonHTTPServerPipeline { channel in
      channel.eventLoop.makeCompletedFuture {
        try channel.pipeline.syncOperations.addHandler(TestHTTPConnectionHandler(registry: registry, connection: connection))
      }
    }
  }
}
