import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

@Suite("Purge across stores")
struct PurgeAcrossStoresTests {
  @Test("one purge removes every variant of a source from the memory, disk and table stores, and nothing else")
  func purgeEverywhere() async throws {
    let directory = NSTemporaryDirectory() + "darkroom-purge-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let disk = try DiskStore.open(directory: directory + "/disk")
    let format = try ImageTableFormat(name: "purge-64", width: 64, height: 64, layout: .rgb8, maxCount: 8)
    let table = try ImageTableStore.open(directory: directory + "/tables", format: format)
    let prefix = UUID().uuidString  // keeps this test's memory entries apart from other tests'
    let sources = try ["keep", "drop"].map { name in
      ImageSource(
        path: try TestImages.write(try TestImages.encoded(.jpeg(), width: 200, height: 150), named: "\(name).jpg", in: directory))
    }
    for width in [32, 64] {
      let pipeline = Pipeline(name: "purge") {
        Fetcher()
        Cache<FetchedData>(store: MemoryStore.shared, maxAge: .seconds(60), prefix: prefix)
        ImageDecoder()
        Resizer(width: width, height: 64, mode: .fit)
        Cache<DecodedImage>(store: table, maxAge: .seconds(60))
        ImageEncoder(.png())
        Cache<EncodedImage>(store: disk, maxAge: .seconds(60), prefix: prefix)
      }
      for source in sources { _ = try await pipeline.process(source) }
    }
    #expect(try await disk.statistics().entries == 4 && table.table.count == 4)
    // Stores opened in code are the caller's to gather: no process-wide set fills itself.
    let stores = CacheStores()
    stores.register(MemoryStore.shared, id: "memory")
    stores.register(disk, id: "disk")
    stores.register(table, id: "table")
    let removed = try await stores.purge(source: sources[1])
    #expect(removed["memory"] == 1 && removed["disk"] == 2 && removed["table"] == 2)
    #expect(try await disk.statistics().entries == 2 && table.table.count == 2)
    let memoryKey = CacheKey.make(
      prefix: prefix, source: try #require(CacheKey.identity(of: sources[0])), upstream: [Fetcher().cacheIdentifier])
    #expect(try await MemoryStore.shared.entry(forKey: memoryKey) != nil)
    #expect(try await stores.purge(source: sources[1]).values.reduce(0, +) == 0)
  }
}
