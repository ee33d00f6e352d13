import ArgumentParser
import Darkroom
import Foundation

/// How a process works jobs from the queue (`darkroom worker` and `darkroom run --queue`).
struct WorkerOptions: ParsableArguments {
  @Option(
    name: .shortAndLong, parsing: .unconditional, help: "How many jobs run at once (1 to 256, default: the number of cores).")
  var jobs: Int?

  @Option(
    parsing: .unconditional,
    help: "How long a claimed job is this worker's without a heartbeat, in seconds (1 to 86400, default 30).")
  var lease: Double = 30

  @Option(
    parsing: .unconditional, help: "How often leases are renewed, in seconds (default: a third of --lease; less than --lease).")
  var heartbeat: Double?

  @Option(
    parsing: .unconditional,
    help: "The most jobs one claim takes (1 to 1000, default: --jobs). A worker holds at most twice --jobs.")
  var batchSize: Int?

  @Option(
    parsing: .unconditional, help: "Attempts before a job is dead (1 to 1000, default 3); permanent errors are never retried.")
  var maxAttempts: Int = 3

  @Option(parsing: .unconditional, help: "How many HTTP transfers run at once (1 to 1024, default 8).")
  var fetchConcurrency: Int = 8

  @Option(parsing: .unconditional, help: "Time limit per image, in seconds (0.000001 to 86400).")
  var timeout: Double = 60

  @Option(help: "Only read local sources inside this directory (symlinks resolved).")
  var root: String?

  @Option(help: "Where cache stages keep disk stores and image tables whose directory is relative or unset.")
  var cacheDir: String?

  @Option(parsing: .unconditional, help: "Threads libvips uses inside one image (1 to 64, default 1).")
  var vipsThreads: Int = 1

  func validate() throws {
    if let jobs { try RunCommand.check("--jobs", jobs, RunCommand.Bounds.jobs) }
    if let batchSize { try RunCommand.check("--batch-size", batchSize, 1...1_000) }
    try RunCommand.check("--max-attempts", maxAttempts, 1...1_000)
    try RunCommand.check("--fetch-concurrency", fetchConcurrency, RunCommand.Bounds.fetchConcurrency)
    try RunCommand.check("--vips-threads", vipsThreads, RunCommand.Bounds.vipsThreads)
    guard (1...86_400).contains(lease) else { throw ValidationError("--lease takes 1 to 86400 seconds, got \(lease)") }
    if let heartbeat {
      guard heartbeat >= 0.01, heartbeat < lease else {
        throw ValidationError("--heartbeat takes 0.01 seconds up to less than --lease (\(lease)), got \(heartbeat)")
      }
    }
    guard RunCommand.Bounds.seconds.contains(timeout) else {
      throw ValidationError("--timeout takes seconds from 0.000001 to 86400 (a day), got \(timeout)")
    }
  }

  var slots: Int { jobs ?? ProcessInfo.processInfo.activeProcessorCount }

  /// The worker's settings, named `name` in the ledger.
  func settings(batch: UUID?) -> QueueWorker.Settings {
    var settings = QueueWorker.Settings(
      slots: slots, batchSize: batchSize ?? slots, name: Self.workerName)
    settings.lease = RunCommand.Bounds.duration(lease)
    settings.heartbeat = heartbeat.map(RunCommand.Bounds.duration)
    settings.maxAttempts = maxAttempts
    settings.batch = batch
    return settings
  }

  /// The loader jobs run through: CPU work `slots` at a time, transfers `fetchConcurrency`.
  func loader() -> ImageLoader {
    var configuration = ImageLoader.Configuration()
    configuration.cpuLimit = slots
    configuration.networkLimit = fetchConcurrency
    configuration.timeout = RunCommand.Bounds.duration(timeout)
    HTTPTransport.setMaxConcurrentTransfers(fetchConcurrency)
    return ImageLoader(configuration: configuration)
  }

  /// This process in the queue's ledger: host name and process id.
  static var workerName: String { "\(ProcessInfo.processInfo.hostName):\(getpid())" }
}
