import ArgumentParser
import Darkroom
import DarkroomPostgres
import Logging

/// `darkroom queue`: the shared job queue on PostgreSQL (issue 16).
struct QueueCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "queue", abstract: "Set up the job queue that darkroom processes share through PostgreSQL.",
    subcommands: [Init.self])

  struct Init: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "init", abstract: "Create or migrate the queue's tables in a PostgreSQL database.",
      discussion: """
        Darkroom makes its tables itself (also on first use by any command that takes --queue): \
        this runs the missing migrations, in one transaction that waits for any other process \
        doing the same, and says which version the tables are at. Exit status: 0 done, 64 a \
        wrong URL, 75 the database cannot be reached or used (try again later).
        """)

    @Option(help: "The queue's database: postgres://USER:PASSWORD@HOST:PORT/DATABASE, or ?host=/socket/folder.")
    var queue: String

    func run() async throws {
      let location: PostgresLocation
      do {
        location = try PostgresLocation(queue)
      } catch {
        Terminal.error("error: \(error.message)")
        throw ExitCode(64)
      }
      var logger = Logger(label: "darkroom.queue")
      logger.logLevel = .warning
      do {
        let (from, to) = try await PostgresJobQueue.withQueue(at: location, logger: logger, preparing: false) {
          try await $0.migrate()
        }
        let what =
          from == 0
          ? "made the queue's tables (version \(to))"
          : from == to
            ? "the queue's tables are at version \(to): nothing to do"
            : "migrated the queue's tables from version \(from) to \(to)"
        Terminal.out("darkroom queue init: \(what) in \(location)")
      } catch let error as PipelineError {
        Terminal.error("error: \(error.message)")
        throw ExitStatus.inUseElsewhere
      }
    }
  }
}
