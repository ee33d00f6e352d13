import Foundation

/// Watches the process's cgroup memory and calls back when it runs short — the server's
/// equivalent of a "memory warning" — so caches can shed entries before the OOM killer acts.
///
/// It reads cgroup v2 (`memory.current` against `memory.max` / `memory.high`, and the PSI
/// `memory.pressure` "some avg10" figure) or cgroup v1 (`memory.usage_in_bytes` less inactive
/// file pages, against `memory.limit_in_bytes`). Pressure means usage at or above `threshold`
/// of the limit, or tasks stalled on memory more than `stallPercent` of the last 10 s.
///
/// ```swift
/// let monitor = MemoryPressureMonitor { _ in MemoryStore.shared.trim(toCost: MemoryStore.shared.cache.totalCost / 2) }
/// monitor.start()
/// ```
package final class MemoryPressureMonitor: Sendable {
  /// One look at the cgroup.
  public struct Reading: Sendable, Equatable {
    /// Bytes in use (v1: without inactive file cache, which the kernel reclaims first).
    public var usage: Int
    /// The limit that applies (the lower of `memory.high` and `memory.max`), if any.
    public var limit: Int?
    /// PSI: percent of the last 10 s some task stalled on memory (v2 only).
    public var stallPercent: Double?

    public init(usage: Int, limit: Int?, stallPercent: Double?) {
      self.usage = usage
      self.limit = limit
      self.stallPercent = stallPercent
    }
  }

  /// The cgroup directory read.
  public let directory: String
  public let threshold: Double
  public let stallPercent: Double
  public let interval: Duration
  private let onPressure: @Sendable (Reading) -> Void
  private let task = TaskBox()

  /// Creates a monitor for `directory` (default: this process's memory cgroup).
  public init(
    directory: String? = nil, threshold: Double = 0.9, stallPercent: Double = 10, interval: Duration = .seconds(2),
    onPressure: @escaping @Sendable (Reading) -> Void
  ) {
    self.directory = directory ?? Self.processCgroupDirectory()
    self.threshold = threshold
    self.stallPercent = stallPercent
    self.interval = interval
    self.onPressure = onPressure
  }

  deinit { task.cancel() }

  /// The memory cgroup of this process, from `/proc/self/cgroup`.
  public static func processCgroupDirectory(procFile: String = "/proc/self/cgroup", root: String = "/sys/fs/cgroup") -> String {
    let lines = (try? String(contentsOfFile: procFile, encoding: .utf8))?.split(separator: "\n") ?? []
    var candidates: [String] = []
    for line in lines {
      let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
      guard parts.count == 3 else { continue }
      let path = String(parts[2])
      if parts[1].split(separator: ",").contains("memory") { candidates += [root + "/memory" + path, root + "/memory"] }
      if parts[0] == "0" && parts[1].isEmpty { candidates += [root + path, root + "/unified" + path, root] }
    }
    let files = ["memory.current", "memory.usage_in_bytes"]
    return candidates.first { dir in files.contains { FileManager.default.fileExists(atPath: dir + "/" + $0) } } ?? root
  }

  /// Reads the cgroup now; `nil` when it exposes no memory accounting.
  public func read() -> Reading? {
    func number(_ name: String) -> Int? {
      guard let text = try? String(contentsOfFile: directory + "/" + name, encoding: .utf8) else { return nil }
      return Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
    if let current = number("memory.current") {
      let limits = [number("memory.high"), number("memory.max")].compactMap { $0 }
      return Reading(usage: current, limit: limits.min(), stallPercent: stall())
    }
    guard let usage = number("memory.usage_in_bytes") else { return nil }
    let inactive = statistic("total_inactive_file") ?? statistic("inactive_file") ?? 0
    let limit = number("memory.limit_in_bytes").flatMap { $0 >= Int.max / 2 ? nil : $0 }
    return Reading(usage: max(0, usage - inactive), limit: limit, stallPercent: nil)
  }

  /// Whether a reading counts as pressure.
  public func isUnderPressure(_ reading: Reading) -> Bool {
    if let limit = reading.limit, limit > 0, Double(reading.usage) >= threshold * Double(limit) { return true }
    if let stall = reading.stallPercent, stall >= stallPercent { return true }
    return false
  }

  /// Reads once and calls back under pressure; returns whether it did.
  @discardableResult
  public func check() -> Bool {
    guard let reading = read(), isUnderPressure(reading) else { return false }
    onPressure(reading)
    return true
  }

  /// Checks every ``interval`` on a background task until ``stop()`` or release.
  public func start() {
    let interval = interval
    task.replace(
      Task.detached(priority: .utility) { [weak self] in
        while !Task.isCancelled {
          self?.check()
          try? await Task.sleep(for: interval)
        }
      })
  }

  /// Stops checking.
  public func stop() { task.cancel() }

  private func stall() -> Double? {
    guard let text = try? String(contentsOfFile: directory + "/memory.pressure", encoding: .utf8) else { return nil }
    guard let some = text.split(separator: "\n").first(where: { $0.hasPrefix("some") }) else { return nil }
    return some.split(separator: " ").first { $0.hasPrefix("avg10=") }.flatMap { Double($0.dropFirst(6)) }
  }

  private func statistic(_ name: String) -> Int? {
    guard let text = try? String(contentsOfFile: directory + "/memory.stat", encoding: .utf8) else { return nil }
    for line in text.split(separator: "\n") {
      let parts = line.split(separator: " ")
      if parts.count == 2, parts[0] == name { return Int(parts[1]) }
    }
    return nil
  }
}

extension MemoryStore {
  /// Starts trimming this store to half its size, and freeing the idle buffers of the shared
  /// ``BufferRecycler``, whenever the process's cgroup is short of memory; keep the returned
  /// monitor alive (release or `stop()` it to end).
  package func trimOnMemoryPressure(directory: String? = nil, interval: Duration = .seconds(2)) -> MemoryPressureMonitor {
    let monitor = MemoryPressureMonitor(directory: directory, interval: interval) { [weak self] _ in
      BufferRecycler.shared.trim()
      guard let self else { return }
      self.trim(toCost: self.cache.totalCost / 2)
    }
    monitor.start()
    return monitor
  }
}

/// A task slot that can be replaced and cancelled from any thread.
final class TaskBox: Sendable {
  private let task = Protected<Task<Void, Never>?>(nil)
  func replace(_ new: Task<Void, Never>) {
    task.withLock { task in
      task?.cancel()
      task = new
    }
  }
  func cancel() {
    task.withLock { task in
      task?.cancel()
      task = nil
    }
  }
}
