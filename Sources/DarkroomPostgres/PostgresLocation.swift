import DarkroomCore
import Foundation
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
    username = url.percentEncodedUser.flatMap { $0.removingPercentEncoding }.flatMap { $0.isEmpty ? nil : $0 } ?? "postgres"
    password = url.percentEncodedPassword.flatMap { $0.removingPercentEncoding }
    if let given = url.port {
      guard (1...65_535).contains(given) else {
        throw PipelineError(.invalidInput, "the queue URL's port must be 1–65535, not \(given)")
      }
      port = given
    } else {
      port = 5432
    }
    let path = url.percentEncodedPath.removingPercentEncoding ?? ""
    let name = path.hasPrefix("/") ? String(path.dropFirst()) : path
    guard !name.contains("/") else {
      throw PipelineError(.invalidInput, "the queue URL's path must be one database name, not \(name)")
    }
    database = name.isEmpty ? username : name
    host = url.host.flatMap { $0.isEmpty ? nil : $0 }
    socketFolder = nil
    sslMode = .prefer
    for item in url.queryItems ?? [] {
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
    if socketFolder != nil { host = nil }
    guard host != nil || socketFolder != nil else {
      throw PipelineError(.invalidInput, "the queue URL names no host (postgres://HOST/DATABASE or ?host=/socket/folder)")
    }
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

  /// The location without its password (for logs and messages).
  public var description: String {
    let place = socketFolder.map { "?host=\($0)" } ?? ""
    return "postgres://\(username)@\(host ?? ""):\(port)/\(database)\(place)"
  }
}
