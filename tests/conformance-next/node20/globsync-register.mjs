import { register } from 'node:module';
register('./globsync-hooks.mjs', import.meta.url);
