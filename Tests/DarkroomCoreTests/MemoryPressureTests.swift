import DarkroomCore
import Foundation
import Testing

@Suite("Memory pressure")
struct MemoryPressureTests {
  func cgroup(_ files: [String: String]) throws -> String {
    let directory = NSTemporaryDirectory() + "darkroom-cgroup-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    for (name, text) in files { try text.write(toFile: directory + "/" + name, atomically: true, encoding: .utf8) }
    return directory
  }

  @Test("cgroup v2: usage near memory.max or memory.high, or a memory stall, is pressure")
  func version2() throws {
    let calm = try cgroup([
      "memory.current": "500000000\n", "memory.max": "1000000000\n", "memory.high": "max\n",
      "memory.pressure": "some avg10=0.50 avg60=0.10 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    ])
    let tight = try cgroup(["memory.current": "950000000\n", "memory.max": "max\n", "memory.high": "1000000000\n"])
    let stalled = try cgroup([
      "memory.current": "1\n", "memory.max": "max\n", "memory.pressure": "some avg10=42.00 avg60=1 avg300=0 total=9\n",
    ])
    defer { for path in [calm, tight, stalled] { try? FileManager.default.removeItem(atPath: path) } }
    let noop: @Sendable (MemoryPressureMonitor.Reading) -> Void = { _ in }
    let reading = try #require(MemoryPressureMonitor(directory: calm, onPressure: noop).read())
    #expect(reading == .init(usage: 500_000_000, limit: 1_000_000_000, stallPercent: 0.5))
    #expect(!MemoryPressureMonitor(directory: calm, onPressure: noop).check())
    #expect(MemoryPressureMonitor(directory: tight, onPressure: noop).check())
    #expect(MemoryPressureMonitor(directory: stalled, onPressure: noop).check())
  }

  @Test("cgroup v1: inactive file pages do not count; no limit means no pressure from usage")
  func version1() throws {
    let v1 = try cgroup([
      "memory.usage_in_bytes": "960000000\n", "memory.limit_in_bytes": "1000000000\n",
      "memory.stat": "cache 1\ntotal_inactive_file 200000000\n",
    ])
    let unlimited = try cgroup(["memory.usage_in_bytes": "960000000\n", "memory.limit_in_bytes": "9223372036854771712\n"])
    defer { for path in [v1, unlimited] { try? FileManager.default.removeItem(atPath: path) } }
    let monitor = MemoryPressureMonitor(directory: v1) { _ in }
    #expect(monitor.read() == .init(usage: 760_000_000, limit: 1_000_000_000, stallPercent: nil))
    #expect(!monitor.check())
    #expect(MemoryPressureMonitor(directory: unlimited) { _ in }.read()?.limit == nil)
  }

  @Test("the memory store halves itself when its monitor reports pressure")
  func storeTrims() async throws {
    let tight = try cgroup(["memory.current": "990\n", "memory.max": "1000\n"])
    defer { try? FileManager.default.removeItem(atPath: tight) }
    let store = MemoryStore(costLimit: 1 << 20)
    for index in 0..<64 {
      try await store.setEntry(CacheEntry(value: index), forKey: "k\(index)", source: "s\(index)")
    }
    #expect(store.cache.totalCost == 64 * 1024)
    let monitor = MemoryPressureMonitor(directory: tight) { [store] _ in store.trim(toCost: store.cache.totalCost / 2) }
    #expect(monitor.check())
    #expect(store.cache.totalCost <= 32 * 1024)
    #expect(try await store.entry(forKey: "k63") != nil)  // the most recent stay
  }

  @Test("this process's cgroup is found and readable here")
  func processCgroup() {
    let directory = MemoryPressureMonitor.processCgroupDirectory()
    let reading = MemoryPressureMonitor(directory: directory) { _ in }.read()
    #expect(reading == nil || reading!.usage > 0)
  }

  @Test("the cgroup path comes from /proc/self/cgroup (v1 memory line, or the v2 line)")
  func parsesProcFile() throws {
    let root = try cgroup([:])
    defer { try? FileManager.default.removeItem(atPath: root) }
    try FileManager.default.createDirectory(atPath: root + "/memory/job", withIntermediateDirectories: true)
    try "1".write(toFile: root + "/memory/job/memory.usage_in_bytes", atomically: true, encoding: .utf8)
    let proc = root + "/cgroup"
    try "4:memory:/job\n0::/\n".write(toFile: proc, atomically: true, encoding: .utf8)
    #expect(MemoryPressureMonitor.processCgroupDirectory(procFile: proc, root: root) == root + "/memory/job")
  }
}
