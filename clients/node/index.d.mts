// The ES module's types: the package's, and SwlStore as the default export.
import { SwlStore } from './index.js';

export * from './index.js';
export default SwlStore;
