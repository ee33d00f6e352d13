import DarkroomPostgres
import DarkroomPostgresTestServer
import Testing

/// Runs a suite with the process's shared ``PostgresTestServer`` (``PostgresTestServer/current``
/// inside it); each test makes a database of its own on it.
struct WithPostgresServer: SuiteTrait, TestScoping {
  func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
    let server = try await PostgresTestServer.shared()
    try await PostgresTestServer.$current.withValue(server) { try await function() }
  }
}

extension PostgresTestServer {
  @TaskLocal static var current: PostgresTestServer?

  /// The suite's server (see ``WithPostgresServer``).
  static var suite: PostgresTestServer {
    get throws {
      guard let current else { throw Failure(message: "no PostgreSQL server: put the suite under .postgresServer") }
      return current
    }
  }
}

extension Trait where Self == WithPostgresServer {
  /// One PostgreSQL server for the whole suite.
  static var postgresServer: Self { WithPostgresServer() }
}

/// Runs `body` with a queue on a new, empty database of the suite's server (its tables made).
func withNewQueue<T: Sendable>(_ body: @Sendable (PostgresJobQueue) async throws -> T) async throws -> T {
  let location = try await PostgresTestServer.suite.newDatabase()
  return try await PostgresJobQueue.withQueue(at: location) { try await body($0) }
}

/// Waits, yielding, until `condition` holds (work of another task has arrived), or the test is
/// cancelled.
func eventually(_ condition: () -> Bool) async {
  while !condition() && !Task.isCancelled { await Task.yield() }
}
