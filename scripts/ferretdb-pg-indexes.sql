-- Indexes FerretDB 1.x can use on PostgreSQL. Run once on FerretDB's database, before FerretDB
-- creates its collections:
--   psql "$FERRETDB_PG_URL" -f scripts/ferretdb-pg-indexes.sql
--
-- FerretDB 1.x on PostgreSQL stores each document as one jsonb column and pushes a field's
-- equality down to SQL as containment: `_jsonb -> 'wa_id' @> '"34600…"'`. The indexes it
-- creates for MongoDB's createIndexes (and for `_id`) are btree indexes on `_jsonb -> 'field'`,
-- which cannot serve `@>`: every find, update and delete, by `_id` too, scans the whole table
-- (`explain` on a find shows a Seq Scan). This event trigger gives each of FerretDB's btree
-- indexes a GIN twin on its first field, which can. See docs/scaling.md.
CREATE OR REPLACE FUNCTION ferretdb_gin_twin() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE
  command record;
  tbl text;
  field text;
BEGIN
  FOR command IN SELECT * FROM pg_event_trigger_ddl_commands()
                 WHERE command_tag = 'CREATE INDEX' LOOP
    -- The twins are GIN: creating one fires this trigger again, and stops here.
    CONTINUE WHEN (SELECT am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam
                   WHERE c.oid = command.objid) <> 'btree';
    SELECT i.indrelid::regclass::text INTO tbl FROM pg_index i
     WHERE i.indexrelid = command.objid;
    field := pg_get_indexdef(command.objid, 1, false);
    CONTINUE WHEN field NOT LIKE '%\_jsonb ->%';
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s USING gin ((%s) jsonb_path_ops) WITH (fastupdate = off)',
                   'gin_' || left(md5(tbl || field), 24), tbl, field);
  END LOOP;
END $$;

DROP EVENT TRIGGER IF EXISTS ferretdb_gin_twin;
CREATE EVENT TRIGGER ferretdb_gin_twin ON ddl_command_end WHEN TAG IN ('CREATE INDEX')
  EXECUTE FUNCTION ferretdb_gin_twin();
