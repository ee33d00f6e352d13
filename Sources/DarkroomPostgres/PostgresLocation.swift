import DarkroomCore
import Foundation
import Logging
import PostgresNIO

/// Where the queue's database is: a `postgres://` URL, read and checked before anything connects.
///
/// The URL is libpq's: `postgres://USER:PASSWORD@HOST:PORT/DATABASE`, with `?host=/run/postgresql`
/// for a Unix socket folder (the socket is `.s.PGSQL.PORT` in it) and `?sslmode=disable|prefer|require`
/// (default `prefer` over TCP). The user defaults to `postgres`, the port to 5432 and the
/// database to the user's name. Every part is checked: a port outside 1–65535, an unknown
/// option, a socket folder that is not absolute, or text that is not a URL is an `invalidInput`
/// error that names the part (the password never appears in a message).
///
/// ```swift
/// let location = try PostgresLocation("postgres://darkroom@db.internal:5432/images")
/// let client = PostgresClient(configuration: location.configuration)
/// ```
public struct PostgresLocation: Sendable, Hashable, CustomStringConvertible {
  public var username: String
  public var password: String?
  public var database: String
  /// The TCP host, or `nil` for a Unix socket.
  public var host: String?
  public var port: Int
  /// The folder that holds the server's Unix socket.
  public var socketFolder: String?
  public var sslMode: SSLMode

  /// What `sslmode` asks for.
  public enum SSLMode: String, Sendable, Hashable {
    case disable, prefer, require
  }

  public init(_ text: String) throws(PipelineError) {
    guard text.utf8.count <= 4_096, let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(),
      scheme == "postgres" || scheme == "postgresql"
    else {
      throw PipelineError(.invalidInput, "the queue must be a postgres:// URL (postgres://USER@HOST:PORT/DATABASE)")
    }
    username = try Self.decoded(url.percentEncodedUser, "user name") ?? ""
    if username.isEmpty { username = "postgres" }
    password = try Self.decoded(url.percentEncodedPassword, "password")
    if let given = url.port {
      guard (1...65_535).contains(given) else {
        throw PipelineError(.invalidInput, "the queue URL's port must be 1–65535, not \(given)")
      }
      port = given
    } else {
      // A port that is there but not a number URLComponents can hold (99999999999999999999).
      guard url.rangeOfPort.map({ text[$0].isEmpty }) ?? true else {
        throw PipelineError(.invalidInput, "the queue URL's port must be 1–65535")
      }
      port = 5432
    }
    let path = url.percentEncodedPath
    let encodedName = path.hasPrefix("/") ? String(path.dropFirst()) : path
    guard !encodedName.contains("/") else {
      throw PipelineError(.invalidInput, "the queue URL's path must be one database name")
    }
    let name = try Self.decoded(encodedName, "database name") ?? ""
    database = name.isEmpty ? username : name
    var host = try Self.decoded(url.percentEncodedHost, "host") ?? ""
    if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }  // an IPv6 address
    self.host = host.isEmpty ? nil : host
    socketFolder = nil
    sslMode = .prefer
    var seen: Set<String> = []
    for item in url.queryItems ?? [] {
      guard seen.insert(item.name).inserted else {
        throw PipelineError(.invalidInput, "the queue URL gives \(item.name)= more than once")
      }
      switch item.name {
      case "host":
        guard let value = item.value, value.hasPrefix("/"), !value.contains("\0") else {
          throw PipelineError(.invalidInput, "the queue URL's host= must be the absolute path of a socket folder")
        }
        socketFolder = value
      case "sslmode":
        guard let mode = item.value.flatMap(SSLMode.init(rawValue:)) else {
          throw PipelineError(.invalidInput, "the queue URL's sslmode must be disable, prefer or require")
        }
        sslMode = mode
      default:
        throw PipelineError(.invalidInput, "the queue URL has an unknown option \(item.name) (host=, sslmode=)")
      }
    }
    if socketFolder != nil { self.host = nil }
    guard self.host != nil || socketFolder != nil else {
      throw PipelineError(.invalidInput, "the queue URL names no host (postgres://HOST/DATABASE or ?host=/socket/folder)")
    }
  }

  /// A URL part, percent-decoded: broken escapes and NUL bytes (which would end the name in the
  /// server's start-up message) are refused, never replaced by a default.
  private static func decoded(_ part: String?, _ what: String) throws(PipelineError) -> String? {
    guard let part else { return nil }
    guard let text = part.removingPercentEncoding, !text.contains("\0") else {
      throw PipelineError(.invalidInput, "the queue URL's \(what) is not valid percent-encoded UTF-8 without NUL")
    }
    return text
  }

  /// postgres-nio's client configuration for this location.
  public var configuration: PostgresClient.Configuration {
    if let socketFolder {
      return PostgresClient.Configuration(
        unixSocketPath: socketFolder + "/.s.PGSQL.\(port)", username: username, password: password, database: database)
    }
    let tls: PostgresClient.Configuration.TLS =
      switch sslMode {
      case .disable: .disable
      case .prefer: .prefer(.makeClientConfiguration())
      case .require: .require(.makeClientConfiguration())
      }
    return PostgresClient.Configuration(
      host: host ?? "localhost", port: port, username: username, password: password, database: database, tls: tls)
  }

  /// postgres-nio's client configuration for this location, its statements ended by the server
  /// after `statementTimeout` (`statement_timeout`): a call its client gave up on (a lock held
  /// elsewhere) must not go on and commit afterwards, nor keep its connection.
  ///
  /// ```swift
  /// let client = PostgresClient(configuration: location.configuration(statementTimeout: .seconds(14)))
  /// ```
  public func configuration(statementTimeout: Duration) -> PostgresClient.Configuration {
    var configuration = configuration
    let milliseconds = max(
      1, statementTimeout.components.seconds * 1_000 + statementTimeout.components.attoseconds / 1_000_000_000_000_000)
    configuration.options.additionalStartupParameters.append(("statement_timeout", "\(milliseconds)"))
    return configuration
  }

  /// Connects once and hangs up, so that a queue that cannot be reached fails at once with its
  /// cause (no such socket, connection refused, a login refused) instead of after the pool's
  /// own retries.
  func checkConnection(logger: Logger) async throws(PipelineError) {
    do {
      let connection: PostgresConnection
      if let socketFolder {
        connection = try await PostgresConnection.connect(
          configuration: .init(
            unixSocketPath: socketFolder + "/.s.PGSQL.\(port)", username: username, password: password, database: database),
          id: 0, logger: logger)
      } else {
        let tls: PostgresConnection.Configuration.TLS =
          switch sslMode {
          case .disable: .disable
          case .prefer: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
          case .require: .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
          }
        connection = try await PostgresConnection.connect(
          configuration: .init(
            host: host ?? "localhost", port: port, username: username, password: password, database: database, tls: tls),
          id: 0, logger: logger)
      }
      try await connection.close()
    } catch {
      // Said of the database, not of "the queue": `serve --shared-cache` checks it too.
      throw PipelineError(.queueUnavailable, "cannot reach the database at \(self): \(PostgresJobQueue.detail(of: error))")
    }
  }

  /// The location without its password (for logs and messages).
  public var description: String {
    let place = socketFolder.map { "?host=\($0)" } ?? ""
    return "postgres://\(username)@\(host ?? ""):\(port)/\(database)\(place)"
  }
}
