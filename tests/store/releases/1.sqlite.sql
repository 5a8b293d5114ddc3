BEGIN TRANSACTION;
CREATE TABLE dialogs (
    id TEXT PRIMARY KEY, human_id TEXT NOT NULL, active INTEGER NOT NULL, doc TEXT NOT NULL);
INSERT INTO "dialogs" VALUES('a8e23794cb5748f289d15afeae1f3c6c','38deff03afc34e2eaeb6bb6ae675e5ee',1,'{"dialog_id":"a8e23794cb5748f289d15afeae1f3c6c","channel_type":"http_client","date_start":"2026-11-25T10:31:29.755000Z","date_finish":null,"rating":null,"human_id":"38deff03afc34e2eaeb6bb6ae675e5ee","bot":{"id":"f305ccfb51414e1fae158cae23cb6bfb","user_type":"bot","attributes":{},"persona":{}},"attributes":{}}');
CREATE TABLE idempotency_keys (
    user_id TEXT NOT NULL, key TEXT NOT NULL, reply TEXT, fingerprint TEXT, alive_until REAL,
    expires_at REAL, PRIMARY KEY (user_id, key));
CREATE TABLE lines (
    user_id TEXT NOT NULL, place INTEGER NOT NULL, done INTEGER NOT NULL,
    alive_until REAL NOT NULL, utt_id TEXT, interrupt INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, place));
INSERT INTO "lines" VALUES('cat',1,1,1.79560271975425601006e+09,NULL,0);
CREATE TABLE users (
    id TEXT PRIMARY KEY, user_id TEXT NOT NULL UNIQUE, doc TEXT NOT NULL);
INSERT INTO "users" VALUES('38deff03afc34e2eaeb6bb6ae675e5ee','cat','{"id":"38deff03afc34e2eaeb6bb6ae675e5ee","user_type":"human","user_external_id":"cat","attributes":{},"persona":{},"profile":{"name":null,"gender":null,"birthdate":null,"location":null,"timezone":null}}');
CREATE TABLE utterances (
    dialog_id TEXT NOT NULL, seq INTEGER NOT NULL, utt_id TEXT NOT NULL UNIQUE,
    speaker TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (dialog_id, seq));
INSERT INTO "utterances" VALUES('a8e23794cb5748f289d15afeae1f3c6c',0,'8c003dc123834e6b95cc60a98b00ad6b','human','{"speaker":"human","utt_id":"8c003dc123834e6b95cc60a98b00ad6b","text":"built-in turn","user":{},"date_time":"2026-11-25T10:31:29.755000Z","attributes":{},"annotations":{},"hypotheses":[],"errors":[],"trace":[{"service":"tokens","group":"annotators","start":0.0,"duration":0.02,"outcome":"ok","batch_size":1},{"service":"greeting","group":"skills","start":0.01,"duration":0.02,"outcome":"ok","batch_size":1},{"service":"broken","group":"skills","start":0.02,"duration":0.02,"outcome":"error","batch_size":1},{"service":"confidence","group":"response_selectors","start":0.03,"duration":0.02,"outcome":"ok","batch_size":1}],"skill_selection":[],"message_key":null,"interrupted":false}');
INSERT INTO "utterances" VALUES('a8e23794cb5748f289d15afeae1f3c6c',1,'6f98c39e08ee4e498bd5cb5953c430af','bot','{"speaker":"bot","utt_id":"6f98c39e08ee4e498bd5cb5953c430af","text":"built-in answer","orig_text":null,"active_skill":"greeting","confidence":1.0,"user":{},"date_time":"2026-11-25T10:31:29.756000Z","attributes":{},"annotations":{},"rating":null}');
INSERT INTO "utterances" VALUES('a8e23794cb5748f289d15afeae1f3c6c',2,'12e51ef48ae5420486718eae55a39717','human','{"speaker":"human","utt_id":"12e51ef48ae5420486718eae55a39717","text":"dream turn","user":{},"date_time":"2026-11-25T10:31:29.757000Z","attributes":{},"annotations":{},"hypotheses":[],"errors":[],"trace":[{"service":"skills.eliza","group":"skills","start":0.0,"duration":0.02,"outcome":"ok","batch_size":1},{"service":"sentiment.classifier","group":"sentiment","start":0.01,"duration":0.02,"outcome":"ok","batch_size":1},{"service":"bot_checker","group":"services","start":0.02,"duration":0.02,"outcome":"skipped","batch_size":1}],"skill_selection":[],"message_key":null,"interrupted":false}');
INSERT INTO "utterances" VALUES('a8e23794cb5748f289d15afeae1f3c6c',3,'37056a2a9cec401e9c0f10f0950601e1','bot','{"speaker":"bot","utt_id":"37056a2a9cec401e9c0f10f0950601e1","text":"dream answer","orig_text":null,"active_skill":"greeting","confidence":1.0,"user":{},"date_time":"2026-11-25T10:31:29.757000Z","attributes":{},"annotations":{},"rating":null}');
CREATE INDEX dialogs_by_human ON dialogs (human_id, active);
CREATE UNIQUE INDEX one_active_dialog ON dialogs (human_id) WHERE active = 1;
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
COMMIT;
PRAGMA user_version = 5;
