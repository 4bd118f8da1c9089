// Network.framework's API speaks Data, URL and DispatchQueue, and Network.framework code names
// them with `import Network` alone; `import Braid` brings the same modules along so that code
// compiles with only its import changed.
@_exported import Dispatch
@_exported import Foundation
